// Fuzzes tool input validation (protocol/json_schema, SPEC §5 -32602 and §11's subset): fuzzed
// instances against the built-in tools' real input schemas, and fuzzed schemas (what custom
// tool manifests will bring) against fuzzed instances.
//
// Input: the first line is a built-in tool's name or a JSON schema; the rest is the instance:
// the `arguments` of a tools/call, taken out of a request body through parse_message, so it
// is exactly what the dispatcher could be handed. The schema is parsed with the same limits.
#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/serialize.hpp>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "daemon/tools/builtin.hpp"
#include "protocol/json_schema.hpp"
#include "protocol/jsonrpc.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "tests/fuzz/json_near.hpp"

namespace {
namespace json = boost::json;
namespace tw = toolwarden;
using tw::protocol::SchemaViolation;
using tw::protocol::validate;

// The registry the daemon builds, so the schemas are the ones tools/call validates against.
const tw::daemon::ToolRegistry& builtin_tools() {
  static const auto registry = [] {
    auto r = std::make_unique<tw::daemon::ToolRegistry>();
    tw::daemon::register_builtin_tools(*r, std::make_shared<const tw::policy::SensitiveNames>(),
                                       std::make_shared<const tw::policy::CommandRegistry>(),
                                       std::make_shared<const tw::daemon::SandboxReadiness>());
    return r;
  }();
  return *registry;
}

// The SPEC §6 tools register_builtin_tools registers (policy::kBuiltinTools also holds the
// `probes` grant name and the probe tools, which the daemon registers with its probe service).
constexpr std::string_view kSpecTools[] = {"local_read", "local_list", "local_search", "local_edit",
                                           "local_test"};

std::optional<json::value> parse(std::string_view text) {
  json::parse_options opts;
  opts.max_depth = tw::protocol::kMaxJsonDepth;
  json::error_code ec;
  auto v = json::parse(text, ec, json::storage_ptr(), opts);
  if (ec) return std::nullopt;
  return v;
}

std::optional<json::value> arguments_of(std::string_view text) {
  std::string body = R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":)";
  body += text;
  body += "}}";
  auto parsed = tw::protocol::parse_message(body);
  const auto* m = std::get_if<tw::protocol::Message>(&parsed);
  if (m == nullptr || !m->params.is_object()) return std::nullopt;
  const auto* args = m->params.get_object().if_contains("arguments");
  if (args == nullptr) return std::nullopt;
  return *args;
}

std::string describe(const json::value& schema, const json::value& instance,
                     const std::optional<SchemaViolation>& verdict) {
  return "schema " + json::serialize(schema) + "\n  instance " + json::serialize(instance) +
         "\n  verdict " + (verdict ? verdict->path + " " + verdict->message : "valid");
}

bool same(const std::optional<SchemaViolation>& a, const std::optional<SchemaViolation>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->path == b->path && a->message == b->message);
}

bool is_number(const json::value& v) { return v.is_int64() || v.is_uint64() || v.is_double(); }

// Every int64, uint64 and double is exact in x86-64's 64-bit-mantissa long double: an oracle
// for the validator's number comparisons that cannot round.
static_assert(std::numeric_limits<long double>::digits >= 64);
long double exact(const json::value& v) {
  if (v.is_int64()) return static_cast<long double>(v.get_int64());
  if (v.is_uint64()) return static_cast<long double>(v.get_uint64());
  return static_cast<long double>(v.get_double());
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Numbers are compared by value (JSON Schema): minimum, maximum and const agree with the
// exact oracle, in both directions.
void check_numbers(const json::value& schema, const json::value& instance,
                   const std::optional<SchemaViolation>& verdict) {
  if (!schema.is_object() || !is_number(instance)) return;
  const auto& s = schema.get_object();
  const auto x = exact(instance);
  // NaN has no order (a schema parsed here may hold one: Boost.JSON reads 0e999 as NaN; the
  // daemon's own paths refuse non-finite numbers).
  auto ordered = [](const json::value& bound) {
    return is_number(bound) && !std::isnan(static_cast<double>(exact(bound)));
  };
  if (std::isnan(static_cast<double>(x))) return;
  if (const auto* min = s.if_contains("minimum"); min && ordered(*min)) {
    if (!verdict) FUZZ_CHECK(x >= exact(*min), describe(schema, instance, verdict));
    if (verdict && starts_with(verdict->message, "minimum")) {
      FUZZ_CHECK(x < exact(*min), describe(schema, instance, verdict));
    }
  }
  if (const auto* max = s.if_contains("maximum"); max && ordered(*max)) {
    if (!verdict) FUZZ_CHECK(x <= exact(*max), describe(schema, instance, verdict));
    if (verdict && starts_with(verdict->message, "maximum")) {
      FUZZ_CHECK(x > exact(*max), describe(schema, instance, verdict));
    }
  }
  if (const auto* c = s.if_contains("const"); c && ordered(*c)) {
    if (!verdict) FUZZ_CHECK(x == exact(*c), describe(schema, instance, verdict));
    if (verdict && starts_with(verdict->message, "const")) {
      FUZZ_CHECK(x != exact(*c), describe(schema, instance, verdict));
    }
  }
}

// What the tools rely on once arguments pass (tool.hpp: "Arguments already passed the input
// schema"): an object, the required properties present, nothing undeclared, each declared
// property of its declared JSON type.
void check_builtin_acceptance(const json::object& schema, const json::value& instance) {
  FUZZ_CHECK(instance.is_object(), json::serialize(instance));
  const auto& args = instance.get_object();
  for (const auto& name : schema.at("required").as_array())
    FUZZ_CHECK(args.contains(name.as_string()), json::serialize(instance));
  const auto& props = schema.at("properties").as_object();
  for (const auto& kv : args) {
    const auto* decl = props.if_contains(kv.key());
    FUZZ_CHECK(decl != nullptr, "undeclared property passed: " + json::serialize(instance));
    const auto type = decl->as_object().at("type").as_string();
    const auto& v = kv.value();
    const bool typed = type == "string"    ? v.is_string()
                       : type == "boolean" ? v.is_bool()
                       : type == "integer" ? (v.is_int64() || v.is_uint64() || v.is_double())
                                           : true;
    FUZZ_CHECK(typed, "wrong type passed: " + json::serialize(instance));
  }
}

void check_validation(const json::value& schema, const json::value& instance) {
  const auto verdict = validate(schema, instance);
  FUZZ_CHECK(same(verdict, validate(schema, instance)), describe(schema, instance, verdict));
  if (verdict) {
    FUZZ_CHECK(starts_with(verdict->path, "$"), describe(schema, instance, verdict));
    FUZZ_CHECK(!verdict->message.empty(), describe(schema, instance, verdict));
  }

  // The instance as a client would send it again: serialize → parse gives the same value and
  // the same verdict (json_near.hpp: a double may come back a neighbour; then only the value is
  // compared).
  auto reparsed = parse(json::serialize(instance));
  FUZZ_CHECK(reparsed && toolwarden::fuzz::json_near(*reparsed, instance),
             json::serialize(instance));
  if (*reparsed == instance) {
    FUZZ_CHECK(same(verdict, validate(schema, *reparsed)), describe(schema, instance, verdict));
  }

  // The same schema one level down (array items, object property) gives the same verdict,
  // reported at the nested path.
  auto nested = [&](const json::value& wrapper, const json::value& wrapped, std::string prefix) {
    const auto inner = validate(wrapper, wrapped);
    FUZZ_CHECK(inner.has_value() == verdict.has_value(), describe(wrapper, wrapped, inner));
    if (inner) {
      FUZZ_CHECK(
          inner->message == verdict->message && inner->path == prefix + verdict->path.substr(1),
          describe(wrapper, wrapped, inner));
    }
  };
  nested(json::object{{"type", "array"}, {"items", schema}}, json::array{instance}, "$[0]");
  nested(json::object{{"type", "object"}, {"properties", json::object{{"arg", schema}}}},
         json::object{{"arg", instance}}, "$.arg");

  // A value is its own const and a member of an enum listing it.
  FUZZ_CHECK(!validate(json::object{{"const", instance}}, instance), json::serialize(instance));
  FUZZ_CHECK(!validate(json::object{{"enum", json::array{nullptr, instance}}}, instance),
             json::serialize(instance));
  FUZZ_CHECK(!validate(json::value(true), instance) && validate(json::value(false), instance) &&
                 !validate(json::object{}, instance),
             json::serialize(instance));
  check_numbers(schema, instance, verdict);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = toolwarden::fuzz::as_text(data, size);
  const auto nl = text.find('\n');
  const auto head = text.substr(0, nl);
  const auto instance = arguments_of(nl == std::string_view::npos ? "{}" : text.substr(nl + 1));
  if (!instance) return 0;

  const auto& tools = builtin_tools();
  for (std::string_view name : kSpecTools) {
    const auto* tool = tools.find(name);
    FUZZ_CHECK(tool != nullptr, std::string(name));
    const json::value schema = tool->descriptor().input_schema;
    check_validation(schema, *instance);
    if (!validate(schema, *instance)) check_builtin_acceptance(schema.get_object(), *instance);
  }
  if (tools.find(head) == nullptr) {
    if (auto schema = parse(head)) check_validation(*schema, *instance);
  }
  return 0;
}
