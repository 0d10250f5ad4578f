// A custom tool's stdout made into a result (SPEC §11): parsing, sanitizing, previews.
#include "protocol/tool_output.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <random>
#include <string>

#include "protocol/mcp.hpp"

namespace toolwarden::protocol {
namespace {
namespace json = boost::json;

const char* kNonFinite = R"({"omitted":true,"reason":"non_finite_number"})";
const char* kTooDeep = R"({"omitted":true,"reason":"depth_exceeded"})";

json::value parse_ok(std::string_view text) {
  std::string error;
  auto v = parse_tool_output(text, &error);
  EXPECT_TRUE(v.has_value()) << text.substr(0, 200) << " → " << error;
  return v ? *v : json::value();
}

std::string parse_error(std::string_view text) {
  std::string error;
  auto v = parse_tool_output(text, &error);
  EXPECT_FALSE(v.has_value()) << text.substr(0, 200);
  return error;
}

// The sanitized result of `text`, serialized.
std::string clean(std::string_view text) {
  return json::serialize(sanitize_tool_result(parse_ok(text)));
}

std::string nested_arrays(std::size_t depth, std::string_view inner = "1") {
  return std::string(depth, '[') + std::string(inner) + std::string(depth, ']');
}

std::string repeat(std::string_view s, std::size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

TEST(ToolOutput, ParsesOneValueWithWhitespaceAround) {
  EXPECT_EQ(json::serialize(parse_ok(" \n{\"a\": [1, true, null, \"x\"]}\r\n\t")),
            R"({"a":[1,true,null,"x"]})");
  EXPECT_EQ(json::serialize(parse_ok("42")), "42");
  EXPECT_EQ(json::serialize(parse_ok("\"text\"")), "\"text\"");
}

TEST(ToolOutput, RefusesWhatIsNotExactlyOneValue) {
  EXPECT_EQ(parse_error(""), "the tool wrote no JSON value");
  EXPECT_EQ(parse_error(" \n "), "the tool wrote no JSON value");
  EXPECT_EQ(parse_error("{} {}"), "the tool wrote more than one JSON value");
  EXPECT_EQ(parse_error("1\n2\n"), "the tool wrote more than one JSON value");
  EXPECT_EQ(parse_error("{\"a\":").substr(0, 32), "the tool did not write valid JSO");
  EXPECT_EQ(parse_error("Traceback (most recent call last):").substr(0, 32),
            "the tool did not write valid JSO");
  EXPECT_EQ(parse_error("[1,]").substr(0, 32), "the tool did not write valid JSO");
  EXPECT_EQ(parse_error("\"\xff\"").substr(0, 32), "the tool did not write valid JSO");
}

TEST(ToolOutput, PythonNonFiniteTokensBecomeOmittedNumbers) {
  // json.dumps([float('nan'), float('inf'), -float('inf')]) == '[NaN, Infinity, -Infinity]'
  EXPECT_EQ(clean("[NaN, Infinity, -Infinity, 1.5]"),
            std::string("[") + kNonFinite + "," + kNonFinite + "," + kNonFinite + ",1.5E0]");
  EXPECT_EQ(clean(R"({"a": NaN, "b": {"c": -Infinity}, "d":Infinity})"),
            std::string(R"({"a":)") + kNonFinite + R"(,"b":{"c":)" + kNonFinite + R"(},"d":)" +
                kNonFinite + "}");
  EXPECT_EQ(clean("NaN"), kNonFinite);
  EXPECT_EQ(clean(" -Infinity\n"), kNonFinite);
  EXPECT_EQ(clean("[NaN,NaN,[Infinity]]"),
            std::string("[") + kNonFinite + "," + kNonFinite + ",[" + kNonFinite + "]]");
}

TEST(ToolOutput, NumbersTooLargeForADoubleAreNonFinite) {
  EXPECT_EQ(clean("1e999"), kNonFinite);
  EXPECT_EQ(clean("[-1e999, 1E400, 1e308]"),
            std::string("[") + kNonFinite + "," + kNonFinite + ",1E308]");
  EXPECT_EQ(clean("1e-999"), "0E0");  // underflow is a finite zero
}

TEST(ToolOutput, NonFiniteTokensInsideStringsAreUntouched) {
  const std::string text =
      R"(["NaN", "Infinity", "-Infinity", "a\"NaN", "\\", "x NaN y", {"NaN": "-Infinity"},)"
      R"( "\\\"Infinity\\", NaN])";
  EXPECT_EQ(clean(text),
            R"(["NaN","Infinity","-Infinity","a\"NaN","\\","x NaN y",{"NaN":"-Infinity"},)"
            R"("\\\"Infinity\\",)" +
                std::string(kNonFinite) + "]");
}

TEST(ToolOutput, TokensOutsideAValuePositionStayInvalid) {
  for (const char* bad : {"[1NaN]", "[NaNx]", "[Infinityy]", "[-NaNs]", "[nan]", "[+Infinity]",
                          "[inf]", "[1 NaN]", "{NaN: 1}", "[\"a\"NaN]"}) {
    parse_error(bad);
  }
}

TEST(ToolOutput, ThousandDeepArrayIsCutAtTheTenthLevel) {
  const auto v = parse_ok(nested_arrays(1000));
  const auto s = sanitize_tool_result(v);
  // Ten arrays survive; the eleventh level is the marker.
  EXPECT_EQ(json::serialize(s), std::string(10, '[') + kTooDeep + std::string(10, ']'));
  EXPECT_EQ(clean(nested_arrays(10)), nested_arrays(10));
  EXPECT_EQ(clean(nested_arrays(11)), std::string(10, '[') + kTooDeep + std::string(10, ']'));
  // Objects count as levels too.
  std::string objects = "1";
  for (int i = 0; i < 12; ++i) objects = "{\"k\":" + objects + "}";
  std::string expected = kTooDeep;
  for (int i = 0; i < 10; ++i) expected = "{\"k\":" + expected + "}";
  EXPECT_EQ(clean(objects), expected);
}

TEST(ToolOutput, DepthLimitOfTheParser) {
  EXPECT_TRUE(parse_tool_output(nested_arrays(kMaxToolOutputDepth), nullptr).has_value());
  EXPECT_EQ(parse_error(nested_arrays(kMaxToolOutputDepth + 1)),
            "the tool's JSON is nested deeper than 2000 levels");
  EXPECT_EQ(parse_error(nested_arrays(100000)),
            "the tool's JSON is nested deeper than 2000 levels");
}

TEST(ToolOutput, LongStringsAreCutAtTwoThousandCharacters) {
  const std::string a2000(2000, 'a');
  EXPECT_EQ(clean("\"" + a2000 + "\""), "\"" + a2000 + "\"");
  EXPECT_EQ(clean("\"" + a2000 + "b\""), "\"" + a2000 + "...\"");
  // Multibyte: 2,001 two-byte characters keep 2,000 of them (4,000 bytes), never half of one.
  EXPECT_EQ(clean("\"" + repeat("é", 2001) + "\""), "\"" + repeat("é", 2000) + "...\"");
  // 2,000 four-byte characters (8,000 bytes) are not over the limit.
  const std::string emoji2000 = repeat("😀", 2000);
  EXPECT_EQ(clean("\"" + emoji2000 + "\""), "\"" + emoji2000 + "\"");
  // A cut right after a 3-byte character, before a 4-byte one.
  const std::string mixed = std::string(1999, 'x') + "€" + "😀" + "tail";
  EXPECT_EQ(clean("\"" + mixed + "\""), "\"" + std::string(1999, 'x') + "€...\"");
}

TEST(ToolOutput, LongKeysAreCutAndTheFirstOfTwoEqualCutKeysIsKept) {
  const std::string k = std::string(2000, 'k');
  const auto s = sanitize_tool_result(
      parse_ok("{\"" + k + "A\": 1, \"" + k + "B\": 2, \"short\": \"" + k + "C\"}"));
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s.as_object().size(), 2u);
  EXPECT_EQ(s.as_object().at(k + "..."), 1);
  EXPECT_EQ(s.as_object().at("short"), json::value(k + "..."));
}

TEST(ToolOutput, FiveMegabyteResults) {
  // One huge string: cut, and then small enough.
  const std::string big(5'000'000, 'z');
  EXPECT_EQ(clean("{\"data\": \"" + big + "\"}"),
            "{\"data\":\"" + std::string(2000, 'z') + "...\"}");
  // Many small values: replaced as a whole, with the size it would have had.
  std::string many = "[";
  for (int i = 0; i < 1'000'000; ++i) many += i == 0 ? "1234" : ",1234";
  many += "]";
  ASSERT_GT(many.size(), 4'900'000u);
  const auto s = sanitize_tool_result(parse_ok(many));
  EXPECT_EQ(json::serialize(s), R"({"omitted":true,"reason":"result_too_large","size_bytes":)" +
                                    std::to_string(many.size()) + "}");
}

TEST(ToolOutput, ResultSizeLimitIsTwentyFourThousandSerializedBytes) {
  // 11 strings of 2,000 characters: 11 × 2,002 + 10 commas + 2 brackets = 22,034 bytes; one
  // more string of x characters adds x + 3.
  auto result_with = [](std::size_t x) {
    json::array a;
    for (int i = 0; i < 11; ++i) a.push_back(json::string(std::string(2000, 's')));
    a.push_back(json::string(std::string(x, 't')));
    return json::value(std::move(a));
  };
  const auto at_limit = result_with(1963);
  ASSERT_EQ(json::serialize(at_limit).size(), 24000u);
  EXPECT_EQ(sanitize_tool_result(at_limit), at_limit);
  EXPECT_EQ(json::serialize(sanitize_tool_result(result_with(1964))),
            R"({"omitted":true,"reason":"result_too_large","size_bytes":24001})");
  // The size is the sanitized one: cutting strings can bring a result under the limit.
  json::array cut_down;
  for (int i = 0; i < 11; ++i) cut_down.push_back(json::string(std::string(100000, 's')));
  EXPECT_TRUE(sanitize_tool_result(cut_down).is_array());
}

TEST(ToolOutput, OtherValuesAreKept) {
  const std::string text =
      R"({"i":-5,"u":18446744073709551615,"d":0.25,"b":false,"n":null,"s":"ok","a":[]})";
  EXPECT_EQ(clean(text), R"({"i":-5,"u":18446744073709551615,"d":2.5E-1,"b":false,"n":null,)"
                         R"("s":"ok","a":[]})");
}

TEST(ToolOutput, TailCharsKeepsTheLastCharacters) {
  EXPECT_EQ(tail_chars("hello world", 5), "world");
  EXPECT_EQ(tail_chars("hello", 10), "hello");
  EXPECT_EQ(tail_chars("hello", 0), "");
  EXPECT_EQ(tail_chars("", 3), "");
  EXPECT_EQ(tail_chars("aé€😀", 3), "é€😀");
  EXPECT_EQ(tail_chars("aé€😀", 1), "😀");
  const std::string long_text = std::string(10000, 'x') + repeat("é", 1200);
  EXPECT_EQ(tail_chars(long_text, kToolOutputPreviewChars), repeat("é", 1200));
  EXPECT_EQ(tail_chars(repeat("😀", 5000), 1200), repeat("😀", 1200));
}

TEST(ToolOutput, TailCharsReplacesInvalidBytes) {
  EXPECT_EQ(tail_chars("ok\xff", 2), "k\xEF\xBF\xBD");
  // A character cut at its start by the output limit: its continuation bytes are invalid.
  EXPECT_EQ(tail_chars("\x98\x80"
                       "ab",
                       4),
            "\xEF\xBF\xBD\xEF\xBF\xBD"
            "ab");
  // Many continuation bytes in a row: each is one replacement character.
  EXPECT_EQ(tail_chars(std::string(100, '\x80'), 3), repeat("\xEF\xBF\xBD", 3));
}

TEST(ToolOutput, TailCharsEqualsTheTailOfTheWholeDecodedText) {
  // The window it decodes must start where the whole text's decoding starts a character.
  std::mt19937 rng(12345);
  const std::string alphabet[] = {"a",
                                  "é",
                                  "€",
                                  "😀",
                                  "\x80",
                                  "\xbf",
                                  "\xc3",
                                  "\xe2\x82",
                                  "\xf0\x9f\x98",
                                  "\xff",
                                  "\xed\xa0\x80",
                                  "\xc0\xaf"};
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const int pieces = static_cast<int>(rng() % 40);
    for (int i = 0; i < pieces; ++i) text += alphabet[rng() % std::size(alphabet)];
    const std::size_t n = rng() % 12;
    const std::string whole = valid_utf8(text);
    std::size_t i = whole.size(), chars = 0;
    while (i > 0 && chars < n) {
      --i;
      if ((static_cast<unsigned char>(whole[i]) & 0xC0) != 0x80) ++chars;
    }
    ASSERT_EQ(tail_chars(text, n), whole.substr(i)) << "round " << round << " n " << n;
  }
}

}  // namespace
}  // namespace toolwarden::protocol
