#include "daemon/token.hpp"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace toolwarden::daemon {
namespace {

template <std::size_t N>
std::array<unsigned char, N> random_bytes() {
  // The kernel's CSPRNG; without flags getrandom waits until it is seeded, and requests of up
  // to 256 bytes are never cut short once it is, but a signal may interrupt the wait.
  std::array<unsigned char, N> b{};
  std::size_t got = 0;
  while (got < N) {
    const ssize_t n = ::getrandom(b.data() + got, N - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  return b;
}

}  // namespace

std::string new_token() {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  auto b = random_bytes<32>();
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : b) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 0x3f]);
  return out;
}

std::string new_job_id() { return new_record_id("job_"); }

std::string new_record_id(std::string_view prefix) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto b = random_bytes<8>();
  std::string out(prefix);
  for (unsigned char c : b) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xf]);
  }
  return out;
}

}  // namespace toolwarden::daemon
