// Digests used by the store and above: SHA-256 as lowercase hex, constant-time comparison.
#pragma once

#include <memory>
#include <string>
#include <string_view>

struct SHA256state_st;  // OpenSSL's SHA256_CTX

namespace toolwarden::store {

/// SHA-256 of `data`, as 64 lowercase hex characters.
std::string sha256_hex(std::string_view data);

/// Incremental SHA-256 for streams that arrive in pieces.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  void update(std::string_view data);
  /// Hex digest of everything seen; the object can not be updated afterwards.
  std::string finish_hex();

 private:
  std::unique_ptr<SHA256state_st> ctx_;
};

/// Equality of two strings in time that depends only on their lengths (CRYPTO_memcmp).
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace toolwarden::store
