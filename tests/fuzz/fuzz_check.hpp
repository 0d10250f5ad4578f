// What the fuzz targets share: a broken invariant aborts with a message, which libFuzzer
// reports as a crash and saves as a reproducer. Unlike assert(), NDEBUG never turns it off.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace toolwarden::fuzz {

[[noreturn]] inline void invariant_broken(const char* file, int line, const char* expr,
                                          std::string_view detail) {
  std::fprintf(stderr, "%s:%d: invariant broken: %s\n  %.*s\n", file, line, expr,
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// The input cut at '\n' (a seed file stays readable: one field per line).
inline std::vector<std::string_view> lines(std::string_view text) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) return out;
    text.remove_prefix(nl + 1);
  }
}

}  // namespace toolwarden::fuzz

// `detail` is evaluated only when the check fails, so it may build strings freely.
#define FUZZ_CHECK(cond, detail)                                                            \
  do {                                                                                      \
    if (!(cond)) ::toolwarden::fuzz::invariant_broken(__FILE__, __LINE__, #cond, (detail)); \
  } while (0)
