#include "store/digest.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>
#include <memory>
#include <stdexcept>

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

// The SHA-256 implementation, fetched once. Explicit fetching skips the per-call lookup that
// EVP_sha256() implies, and the library is set up without reading the system's openssl.cnf
// (nothing here needs it), without its error strings and without an exit handler: a short-lived
// `toolwarden run` otherwise spends a millisecond building and tearing down tables it never uses.
const EVP_MD* sha256_md() {
  static const EVP_MD* const md = [] {
    init_crypto();
    return EVP_MD_fetch(nullptr, "SHA256", nullptr);
  }();
  if (md == nullptr) throw std::runtime_error("sha256: no implementation available");
  return md;
}

struct ThreadCtxFree {
  void operator()(EVP_MD_CTX* ctx) const noexcept { EVP_MD_CTX_free(ctx); }
};

}  // namespace

void init_crypto() {
  static const bool ok =
      OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ATEXIT |
                              OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS |
                              OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_ADD_ALL_DIGESTS,
                          nullptr) == 1;
  if (!ok) throw std::runtime_error("OpenSSL cannot be initialised");
}

void Sha256::FreeCtx::operator()(evp_md_ctx_st* ctx) const noexcept { EVP_MD_CTX_free(ctx); }

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), sha256_md(), nullptr) != 1) {
    throw std::runtime_error("sha256: cannot initialise digest");
  }
}

void Sha256::update(std::string_view data) {
  EVP_DigestUpdate(ctx_.get(), data.data(), data.size());
}

std::string Sha256::finish_hex() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_.get(), md.data(), &len);
  return to_hex(md.data(), len);
}

std::string sha256_hex(std::string_view data) {
  // One context per thread, re-initialised for each digest: EVP_Digest allocates and frees a
  // context every time, and an audited call takes several digests.
  thread_local const std::unique_ptr<EVP_MD_CTX, ThreadCtxFree> ctx(EVP_MD_CTX_new());
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (!ctx || EVP_DigestInit_ex2(ctx.get(), sha256_md(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), md.data(), &len) != 1) {
    throw std::runtime_error("sha256: digest failed");
  }
  return to_hex(md.data(), len);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace toolwarden::store
