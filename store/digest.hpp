// Digests used by the store and above: SHA-256 as lowercase hex, constant-time comparison.
#pragma once

#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace toolwarden::store {

/// SHA-256 of `data`, as 64 lowercase hex characters.
/// Sets up OpenSSL for this process: no system config, no error strings, no exit handler.
/// Called first thing by the CLI so that every later use (digests, RAND_bytes) shares it; the
/// digest functions call it themselves too. Throws when OpenSSL cannot start.
void init_crypto();

std::string sha256_hex(std::string_view data);

/// Incremental SHA-256 for streams that arrive in pieces.
class Sha256 {
 public:
  Sha256();

  void update(std::string_view data);
  /// Hex digest of everything seen; the object can not be updated afterwards.
  std::string finish_hex();

 private:
  struct FreeCtx {
    void operator()(evp_md_ctx_st* ctx) const noexcept;
  };
  std::unique_ptr<evp_md_ctx_st, FreeCtx> ctx_;
};

/// Equality of two strings in time that depends only on their lengths (CRYPTO_memcmp).
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace toolwarden::store
