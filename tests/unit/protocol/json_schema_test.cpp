// JSON Schema subset (SPEC §11): type, properties, required, additionalProperties, enum, const,
// minLength/maxLength, minimum/maximum, minItems/maxItems, items — pass, fail, and the path.
#include "protocol/json_schema.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <string>

namespace toolwarden::protocol {
namespace {
namespace json = boost::json;

json::value J(std::string_view text) { return json::parse(text); }

::testing::AssertionResult passes(std::string_view schema, std::string_view instance) {
  auto v = validate(J(schema), J(instance));
  if (!v) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << instance << " against " << schema << " failed at " << v->path << ": " << v->message;
}

// Fails with the given path, and the message names `keyword`.
::testing::AssertionResult fails_at(std::string_view schema, std::string_view instance,
                                    std::string_view path, std::string_view keyword) {
  auto v = validate(J(schema), J(instance));
  if (!v) return ::testing::AssertionFailure() << instance << " against " << schema << " passed";
  if (v->path != path) {
    return ::testing::AssertionFailure()
           << "path " << v->path << ", want " << path << " (" << v->message << ")";
  }
  if (v->message.find(keyword) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "message '" << v->message << "' does not name " << keyword;
  }
  return ::testing::AssertionSuccess();
}

// ---- type ----------------------------------------------------------------------------------

TEST(JsonSchemaType, EachTypeAcceptsItsOwnAndRejectsOthers) {
  struct Case {
    const char* type;
    const char* good;
    const char* bad;
  };
  for (const auto& c :
       {Case{"object", "{}", "[]"}, Case{"array", "[]", "{}"}, Case{"string", "\"s\"", "1"},
        Case{"boolean", "false", "0"}, Case{"null", "null", "false"},
        Case{"number", "1.5", "\"1\""}, Case{"integer", "3", "3.5"}}) {
    std::string schema = std::string(R"({"type":")") + c.type + "\"}";
    EXPECT_TRUE(passes(schema, c.good)) << c.type;
    EXPECT_TRUE(fails_at(schema, c.bad, "$", "type")) << c.type;
  }
}

TEST(JsonSchemaType, NumberAcceptsIntegersAndIntegerAcceptsWholeDoubles) {
  EXPECT_TRUE(passes(R"({"type":"number"})", "7"));
  EXPECT_TRUE(passes(R"({"type":"number"})", "-7"));
  EXPECT_TRUE(passes(R"({"type":"integer"})", "-7"));
  EXPECT_TRUE(passes(R"({"type":"integer"})", "18446744073709551615"));
  EXPECT_TRUE(passes(R"({"type":"integer"})", "2.0"));
  EXPECT_TRUE(fails_at(R"({"type":"integer"})", "2.25", "$", "type"));
  EXPECT_TRUE(fails_at(R"({"type":"integer"})", "true", "$", "type"));
  EXPECT_TRUE(fails_at(R"({"type":"number"})", "null", "$", "type"));
}

// JSON Schema: an integer is any number with a zero fractional part, whatever its magnitude.
// 1e300 must not be cast to int64 to find out (that cast is undefined behaviour).
TEST(JsonSchemaType, IntegerAcceptsHugeWholeDoubles) {
  EXPECT_TRUE(passes(R"({"type":"integer"})", "1e19"));
  EXPECT_TRUE(passes(R"({"type":"integer"})", "1e300"));
  EXPECT_TRUE(passes(R"({"type":"integer"})", "-1e300"));
  EXPECT_TRUE(fails_at(R"({"type":"integer"})", "1.5e-300", "$", "type"));
}

TEST(JsonSchemaType, ArrayOfTypes) {
  const char* schema = R"({"type":["string","null"]})";
  EXPECT_TRUE(passes(schema, "\"x\""));
  EXPECT_TRUE(passes(schema, "null"));
  EXPECT_TRUE(fails_at(schema, "1", "$", "type"));
  EXPECT_TRUE(fails_at(schema, "{}", "$", "type"));
}

TEST(JsonSchemaType, UnknownTypeNameMatchesNothing) {
  EXPECT_TRUE(fails_at(R"({"type":"text"})", "\"x\"", "$", "type"));
}

// ---- properties / required / additionalProperties -----------------------------------------

TEST(JsonSchemaObject, PropertiesValidateTheirValues) {
  const char* schema =
      R"({"type":"object","properties":{"a":{"type":"string"},"n":{"type":"integer"}}})";
  EXPECT_TRUE(passes(schema, R"({"a":"x","n":1})"));
  EXPECT_TRUE(passes(schema, R"({})")) << "properties alone require nothing";
  EXPECT_TRUE(passes(schema, R"({"other":true})")) << "extra properties pass by default";
  EXPECT_TRUE(fails_at(schema, R"({"a":1})", "$.a", "type"));
  EXPECT_TRUE(fails_at(schema, R"({"a":"x","n":"1"})", "$.n", "type"));
}

TEST(JsonSchemaObject, NestedPathIsReported) {
  const char* schema =
      R"({"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}}}})";
  EXPECT_TRUE(passes(schema, R"({"a":{"b":"ok"}})"));
  EXPECT_TRUE(fails_at(schema, R"({"a":{"b":5}})", "$.a.b", "type"));
  EXPECT_TRUE(fails_at(schema, R"({"a":[]})", "$.a", "type"));
}

TEST(JsonSchemaObject, Required) {
  const char* schema = R"({"type":"object","required":["path","query"]})";
  EXPECT_TRUE(passes(schema, R"({"path":"a","query":"b"})"));
  EXPECT_TRUE(passes(schema, R"({"path":null,"query":0,"x":1})"));
  EXPECT_TRUE(fails_at(schema, R"({"path":"a"})", "$", "required"));
  EXPECT_TRUE(fails_at(schema, R"({})", "$", "required"));
  auto v = validate(J(schema), J(R"({"path":"a"})"));
  ASSERT_TRUE(v);
  EXPECT_NE(v->message.find("query"), std::string::npos)
      << "names the missing property: " << v->message;
}

TEST(JsonSchemaObject, RequiredInsideNestedObject) {
  const char* schema = R"({"type":"object","properties":{"a":{"type":"object","required":["b"]}}})";
  EXPECT_TRUE(fails_at(schema, R"({"a":{}})", "$.a", "required"));
}

TEST(JsonSchemaObject, AdditionalPropertiesFalse) {
  const char* schema =
      R"({"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false})";
  EXPECT_TRUE(passes(schema, R"({"path":"a"})"));
  EXPECT_TRUE(passes(schema, R"({})"));
  EXPECT_TRUE(fails_at(schema, R"({"path":"a","extra":1})", "$.extra", "additionalProperties"));
}

TEST(JsonSchemaObject, AdditionalPropertiesFalseWithoutProperties) {
  EXPECT_TRUE(passes(R"({"type":"object","additionalProperties":false})", "{}"));
  EXPECT_TRUE(fails_at(R"({"type":"object","additionalProperties":false})", R"({"x":1})", "$.x",
                       "additionalProperties"));
}

TEST(JsonSchemaObject, AdditionalPropertiesSchema) {
  const char* schema =
      R"({"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}})";
  EXPECT_TRUE(passes(schema, R"({"a":"s","b":1,"c":2})"));
  EXPECT_TRUE(fails_at(schema, R"({"a":"s","b":"no"})", "$.b", "type"));
  EXPECT_TRUE(fails_at(schema, R"({"a":3})", "$.a", "type"))
      << "declared properties use their own schema";
}

TEST(JsonSchemaObject, AdditionalPropertiesTrue) {
  EXPECT_TRUE(passes(R"({"type":"object","additionalProperties":true})", R"({"x":[1,{}]})"));
}

TEST(JsonSchemaObject, ObjectKeywordsIgnoreNonObjects) {
  EXPECT_TRUE(passes(R"({"required":["a"],"additionalProperties":false})", "\"str\""));
  EXPECT_TRUE(passes(R"({"properties":{"a":{"type":"string"}}})", "[1]"));
}

// ---- enum / const --------------------------------------------------------------------------

TEST(JsonSchemaEnum, OneOfTheListedValues) {
  const char* schema = R"({"enum":["read","write",1,null]})";
  EXPECT_TRUE(passes(schema, "\"read\""));
  EXPECT_TRUE(passes(schema, "\"write\""));
  EXPECT_TRUE(passes(schema, "1"));
  EXPECT_TRUE(passes(schema, "1.0")) << "numbers compare by value";
  EXPECT_TRUE(passes(schema, "null"));
  EXPECT_TRUE(fails_at(schema, "\"READ\"", "$", "enum"));
  EXPECT_TRUE(fails_at(schema, "2", "$", "enum"));
  EXPECT_TRUE(fails_at(schema, "\"1\"", "$", "enum"));
  EXPECT_TRUE(fails_at(schema, "false", "$", "enum"));
}

TEST(JsonSchemaEnum, StructuredValues) {
  const char* schema = R"({"enum":[{"a":1},[1,2]]})";
  EXPECT_TRUE(passes(schema, R"({"a":1})"));
  EXPECT_TRUE(passes(schema, "[1,2]"));
  EXPECT_TRUE(fails_at(schema, "[2,1]", "$", "enum"));
  EXPECT_TRUE(fails_at(schema, R"({"a":2})", "$", "enum"));
}

TEST(JsonSchemaConst, ExactValue) {
  EXPECT_TRUE(passes(R"({"const":"x"})", "\"x\""));
  EXPECT_TRUE(fails_at(R"({"const":"x"})", "\"y\"", "$", "const"));
  EXPECT_TRUE(passes(R"({"const":5})", "5.0"));
  EXPECT_TRUE(fails_at(R"({"const":5})", "5.5", "$", "const"));
  EXPECT_TRUE(passes(R"({"const":null})", "null"));
  EXPECT_TRUE(fails_at(R"({"const":null})", "0", "$", "const"));
  EXPECT_TRUE(fails_at(R"({"const":false})", "0", "$", "const"));
  EXPECT_TRUE(passes(R"({"const":{"k":[1]}})", R"({"k":[1]})"));
  EXPECT_TRUE(fails_at(R"({"const":{"k":[1]}})", R"({"k":[1],"j":0})", "$", "const"));
}

// Numbers compare by mathematical value: two integers that differ must not be equal because
// both round to the same double (2^53 + 1 vs 2^53).
TEST(JsonSchemaConst, LargeIntegersCompareExactly) {
  EXPECT_TRUE(fails_at(R"({"const":9007199254740992})", "9007199254740993", "$", "const"));
  EXPECT_TRUE(fails_at(R"({"enum":[9007199254740992]})", "9007199254740993", "$", "enum"));
  EXPECT_TRUE(fails_at(R"({"maximum":9007199254740992})", "9007199254740993", "$", "maximum"));
}

// Regression (fuzz_json_schema): an integer against a double was compared as two doubles, so
// 2^53 + 1 passed "maximum": 2^53 written as 9007199254740992.0, and uint64's largest value
// equalled the double 2^64.
TEST(JsonSchemaConst, IntegerAgainstDoubleComparesExactly) {
  EXPECT_TRUE(fails_at(R"({"maximum":9007199254740992.0})", "9007199254740993", "$", "maximum"));
  EXPECT_TRUE(passes(R"({"maximum":9007199254740992.0})", "9007199254740992"));
  EXPECT_TRUE(fails_at(R"({"minimum":9007199254740993})", "9007199254740992.0", "$", "minimum"));
  EXPECT_TRUE(
      fails_at(R"({"const":18446744073709551615})", "18446744073709551616.0", "$", "const"));
  EXPECT_TRUE(fails_at(R"({"enum":[9007199254740993]})", "9007199254740992.0", "$", "enum"));
  EXPECT_TRUE(passes(R"({"const":9007199254740992})", "9007199254740992.0"));
  EXPECT_TRUE(passes(R"({"minimum":-9223372036854775808})", "-9223372036854775808.0"));
  EXPECT_TRUE(
      fails_at(R"({"minimum":-9223372036854775807})", "-9223372036854775808.0", "$", "minimum"));
  EXPECT_TRUE(fails_at(R"({"maximum":5})", "5.5", "$", "maximum"));
  EXPECT_TRUE(passes(R"({"maximum":5})", "4.5"));
  EXPECT_TRUE(fails_at(R"({"minimum":-5})", "-5.5", "$", "minimum"));
  EXPECT_TRUE(fails_at(R"({"maximum":1e300})", "1e301", "$", "maximum"));
  EXPECT_TRUE(passes(R"({"maximum":1e300})", "18446744073709551615"));
}

TEST(JsonSchemaConst, InsideProperty) {
  EXPECT_TRUE(fails_at(R"({"properties":{"mode":{"const":"fast"}}})", R"({"mode":"slow"})",
                       "$.mode", "const"));
}

// ---- strings -------------------------------------------------------------------------------

TEST(JsonSchemaString, MinAndMaxLengthInclusive) {
  const char* schema = R"({"type":"string","minLength":2,"maxLength":4})";
  EXPECT_TRUE(passes(schema, "\"ab\""));
  EXPECT_TRUE(passes(schema, "\"abcd\""));
  EXPECT_TRUE(fails_at(schema, "\"a\"", "$", "minLength"));
  EXPECT_TRUE(fails_at(schema, "\"\"", "$", "minLength"));
  EXPECT_TRUE(fails_at(schema, "\"abcde\"", "$", "maxLength"));
}

TEST(JsonSchemaString, LengthCountsCodePointsNotBytes) {
  // "é€😀" is 3 code points in 9 UTF-8 bytes (and 4 UTF-16 units).
  const char* three = "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"";
  EXPECT_TRUE(passes(R"({"maxLength":3})", three));
  EXPECT_TRUE(passes(R"({"minLength":3})", three));
  EXPECT_TRUE(fails_at(R"({"maxLength":2})", three, "$", "maxLength"));
  EXPECT_TRUE(fails_at(R"({"minLength":4})", three, "$", "minLength"));
}

TEST(JsonSchemaString, LengthKeywordsIgnoreNonStrings) {
  EXPECT_TRUE(passes(R"({"maxLength":1})", "12345"));
  EXPECT_TRUE(passes(R"({"minLength":10})", "[1]"));
}

TEST(JsonSchemaString, MaxLengthZero) {
  EXPECT_TRUE(passes(R"({"maxLength":0})", "\"\""));
  EXPECT_TRUE(fails_at(R"({"maxLength":0})", "\"a\"", "$", "maxLength"));
}

// ---- numbers -------------------------------------------------------------------------------

TEST(JsonSchemaNumber, MinimumAndMaximumInclusive) {
  const char* schema = R"({"type":"integer","minimum":1,"maximum":10})";
  EXPECT_TRUE(passes(schema, "1"));
  EXPECT_TRUE(passes(schema, "10"));
  EXPECT_TRUE(passes(schema, "5"));
  EXPECT_TRUE(fails_at(schema, "0", "$", "minimum"));
  EXPECT_TRUE(fails_at(schema, "-1", "$", "minimum"));
  EXPECT_TRUE(fails_at(schema, "11", "$", "maximum"));
}

TEST(JsonSchemaNumber, FractionalBoundsAndValues) {
  const char* schema = R"({"type":"number","minimum":0.5,"maximum":1.5})";
  EXPECT_TRUE(passes(schema, "0.5"));
  EXPECT_TRUE(passes(schema, "1"));
  EXPECT_TRUE(fails_at(schema, "0.49", "$", "minimum"));
  EXPECT_TRUE(fails_at(schema, "1.51", "$", "maximum"));
  EXPECT_TRUE(fails_at(schema, "18446744073709551615", "$", "maximum"));
  EXPECT_TRUE(fails_at(schema, "-9223372036854775808", "$", "minimum"));
}

// Regression (fuzz_json_schema, UBSan): Boost.JSON 1.81 reads 0e999 as NaN, and comparing an
// integer with it cast NaN to int64. Requests and manifests refuse non-finite numbers; a schema
// holding one still validates without undefined behaviour: NaN is neither below nor above.
TEST(JsonSchemaNumber, NanBoundIsNeverCastToAnInteger) {
  EXPECT_TRUE(passes(R"({"minimum":0e999,"maximum":0e999})", "7"));
  EXPECT_TRUE(passes(R"({"minimum":0e999,"maximum":0e999})", "18446744073709551615"));
  EXPECT_TRUE(passes(R"({"minimum":0e999,"maximum":0e999})", "-2.5"));
}

TEST(JsonSchemaNumber, BoundsIgnoreNonNumbers) {
  EXPECT_TRUE(passes(R"({"minimum":5})", "\"1\""));
  EXPECT_TRUE(passes(R"({"maximum":5})", "[100]"));
}

// ---- arrays --------------------------------------------------------------------------------

TEST(JsonSchemaArray, MinAndMaxItemsInclusive) {
  const char* schema = R"({"type":"array","minItems":1,"maxItems":3})";
  EXPECT_TRUE(passes(schema, "[1]"));
  EXPECT_TRUE(passes(schema, "[1,2,3]"));
  EXPECT_TRUE(fails_at(schema, "[]", "$", "minItems"));
  EXPECT_TRUE(fails_at(schema, "[1,2,3,4]", "$", "maxItems"));
}

TEST(JsonSchemaArray, ItemsValidatesEachElementWithIndexInPath) {
  const char* schema = R"({"type":"array","items":{"type":"string"}})";
  EXPECT_TRUE(passes(schema, "[]"));
  EXPECT_TRUE(passes(schema, R"(["a","b"])"));
  EXPECT_TRUE(fails_at(schema, R"([1])", "$[0]", "type"));
  EXPECT_TRUE(fails_at(schema, R"(["a","b",3])", "$[2]", "type"));
}

TEST(JsonSchemaArray, ItemsUnderAPropertyNamedItems) {
  const char* schema =
      R"({"type":"object","properties":{"items":{"type":"array","items":{"type":"integer","minimum":0}}}})";
  EXPECT_TRUE(passes(schema, R"({"items":[0,1,2]})"));
  EXPECT_TRUE(fails_at(schema, R"({"items":[0,1,-2]})", "$.items[2]", "minimum"));
}

TEST(JsonSchemaArray, DeepMixedPath) {
  const char* schema = R"({"type":"object","properties":{"a":{"type":"array","items":
      {"type":"object","properties":{"b":{"type":"array","items":{"enum":["x"]}}}}}}})";
  EXPECT_TRUE(passes(schema, R"({"a":[{"b":["x"]},{"b":[]}]})"));
  EXPECT_TRUE(fails_at(schema, R"({"a":[{"b":["x"]},{"b":["x","y"]}]})", "$.a[1].b[1]", "enum"));
}

TEST(JsonSchemaArray, FirstViolationIsReported) {
  const char* schema = R"({"items":{"type":"string"}})";
  EXPECT_TRUE(fails_at(schema, R"(["ok",1,2])", "$[1]", "type"));
}

TEST(JsonSchemaArray, ArrayKeywordsIgnoreNonArrays) {
  EXPECT_TRUE(passes(R"({"minItems":2,"items":{"type":"string"}})", R"({"a":1})"));
}

// ---- general -------------------------------------------------------------------------------

TEST(JsonSchemaGeneral, EmptySchemaAcceptsAnything) {
  for (auto inst : {"null", "1", "\"s\"", "[]", "{}", "true"})
    EXPECT_TRUE(passes("{}", inst)) << inst;
}

TEST(JsonSchemaGeneral, BooleanSchemas) {
  EXPECT_TRUE(passes("true", "123"));
  EXPECT_TRUE(fails_at("false", "123", "$", ""));
  EXPECT_TRUE(fails_at(R"({"properties":{"a":false}})", R"({"a":1})", "$.a", ""));
  EXPECT_TRUE(passes(R"({"properties":{"a":false}})", R"({"b":1})"));
}

TEST(JsonSchemaGeneral, UnknownKeywordsAreIgnored) {
  EXPECT_TRUE(
      passes(R"({"type":"string","format":"email","pattern":"^z$","description":"d","title":"t"})",
             "\"abc\""));
}

TEST(JsonSchemaGeneral, ToolLikeSchema) {
  const char* schema = R"({"type":"object","additionalProperties":false,"required":["path","query"],
    "properties":{"path":{"type":"string","minLength":1},"query":{"type":"string","maxLength":4096},
    "regex":{"type":"boolean"},"max_results":{"type":"integer","minimum":1,"maximum":10000}}})";
  EXPECT_TRUE(passes(schema, R"({"path":".","query":"x"})"));
  EXPECT_TRUE(passes(schema, R"({"path":".","query":"x","regex":true,"max_results":200})"));
  EXPECT_TRUE(fails_at(schema, R"({"path":".","query":"x","regex":"yes"})", "$.regex", "type"));
  EXPECT_TRUE(fails_at(schema, R"({"path":"","query":"x"})", "$.path", "minLength"));
  EXPECT_TRUE(
      fails_at(schema, R"({"path":".","query":"x","max_results":0})", "$.max_results", "minimum"));
  EXPECT_TRUE(fails_at(schema, R"({"path":".","query":"x","n":1})", "$.n", "additionalProperties"));
  EXPECT_TRUE(fails_at(schema, R"({"query":"x"})", "$", "required"));
  EXPECT_TRUE(fails_at(schema, R"([])", "$", "type"));
}

}  // namespace
}  // namespace toolwarden::protocol
