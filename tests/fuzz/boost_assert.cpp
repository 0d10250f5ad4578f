// Boost's assertions stay on in the fuzz build (BOOST_ENABLE_ASSERT_HANDLER, the `fuzz`
// preset): they catch misuse such as json::value::get_string() on a number, which NDEBUG
// would turn into silent undefined behaviour. A failed one aborts, so libFuzzer keeps the
// input as a reproducer, except the one assertion known to be wrong in Boost 1.81.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace {

// Beast's parse_chunk_header asserts n >= 5 where 4 bytes are valid: a final chunk with no
// chunk before it, arriving in pieces ("0\r\n", then "\r"). The code after it handles that
// case correctly; the assertion was corrected upstream in boostorg/beast#2861 (Boost 1.86).
bool known_wrong(std::string_view expr, std::string_view file) {
  return expr == "n >= 5" && file.size() >= 16 &&
         file.substr(file.size() - 16) == "basic_parser.ipp";
}

}  // namespace

namespace boost {

void assertion_failed_msg(char const* expr, char const* msg, char const* function, char const* file,
                          long line) {
  if (known_wrong(expr, file)) return;
  std::fprintf(stderr, "%s:%ld: %s: Boost assertion `%s' failed%s%s\n", file, line, function, expr,
               msg != nullptr ? ": " : "", msg != nullptr ? msg : "");
  std::abort();
}

void assertion_failed(char const* expr, char const* function, char const* file, long line) {
  assertion_failed_msg(expr, nullptr, function, file, line);
}

}  // namespace boost
