// OpenSSL's SHA-256 itself (its assembly, SHA-NI where the CPU has it), reached through the
// one-algorithm interface rather than EVP: EVP fetches implementations from providers, and
// linking that machinery statically costs every start of the binary some 20,000 load-time
// relocations and 350 KB of copied tables (about half a millisecond of each `toolwarden run`).
// The interface is deprecated in OpenSSL 3.0, not removed; 1.1.1 is the API level it belongs to.
#define OPENSSL_API_COMPAT 10101
#include "store/digest.hpp"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <array>
#include <memory>

namespace toolwarden::store {
namespace {

std::string to_hex(const unsigned char* bytes, unsigned int n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(static_cast<std::size_t>(n) * 2, '\0');
  for (unsigned int i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return out;
}

}  // namespace

Sha256::Sha256() : ctx_(std::make_unique<SHA256state_st>()) { SHA256_Init(ctx_.get()); }
Sha256::~Sha256() {
  if (ctx_) OPENSSL_cleanse(ctx_.get(), sizeof *ctx_);  // it holds the last partial block
}
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(std::string_view data) { SHA256_Update(ctx_.get(), data.data(), data.size()); }

std::string Sha256::finish_hex() {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> md{};
  SHA256_Final(md.data(), ctx_.get());
  return to_hex(md.data(), SHA256_DIGEST_LENGTH);
}

std::string sha256_hex(std::string_view data) {
  SHA256_CTX ctx;
  std::array<unsigned char, SHA256_DIGEST_LENGTH> md{};
  SHA256_Init(&ctx);
  SHA256_Update(&ctx, data.data(), data.size());
  SHA256_Final(md.data(), &ctx);
  OPENSSL_cleanse(&ctx, sizeof ctx);
  return to_hex(md.data(), SHA256_DIGEST_LENGTH);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace toolwarden::store
