#include "protocol/json_schema.hpp"

#include <boost/json/serialize.hpp>
#include <cmath>
#include <cstdint>
#include <limits>

namespace toolwarden::protocol {
namespace json = boost::json;

namespace {

bool is_number(const json::value& v) { return v.is_int64() || v.is_uint64() || v.is_double(); }

bool is_integer(const json::value& v) {
  if (v.is_int64() || v.is_uint64()) return true;
  if (!v.is_double()) return false;
  const double d = v.get_double();
  return std::isfinite(d) && std::trunc(d) == d;  // no cast: out-of-range casts are UB
}

bool matches_type(std::string_view type, const json::value& v) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_bool();
  if (type == "null") return v.is_null();
  if (type == "number") return is_number(v);
  if (type == "integer") return is_integer(v);
  return false;
}

// Orders an int64/uint64 against a double exactly: converting either to the other's type can
// round (9007199254740993 is not above 9007199254740992.0 as a double). Found by
// fuzz_json_schema.
int compare_integer_double(const json::value& integer, double d) {
  // NaN never reaches here from a request or a manifest (both refuse non-finite numbers); it
  // compares as "not below, not above", as with doubles, and is never cast (UB, fuzz_json_schema).
  if (std::isnan(d)) return 0;
  constexpr double kTwo63 = 9223372036854775808.0;
  constexpr double kTwo64 = 18446744073709551616.0;
  if (integer.is_int64()) {
    if (d < -kTwo63) return 1;
    if (d >= kTwo63) return -1;
    const double t = std::trunc(d);  // in [-2^63, 2^63): the cast is exact
    const auto ti = static_cast<std::int64_t>(t);
    const std::int64_t i = integer.get_int64();
    if (i != ti) return i < ti ? -1 : 1;
    return d > t ? -1 : d < t ? 1 : 0;
  }
  if (d < 0) return 1;
  if (d >= kTwo64) return -1;
  const double t = std::trunc(d);  // in [0, 2^64): the cast is exact
  const auto tu = static_cast<std::uint64_t>(t);
  const std::uint64_t u = integer.get_uint64();
  if (u != tu) return u < tu ? -1 : 1;
  return d > t ? -1 : 0;
}

// Orders two numbers exactly, whatever their representation.
int compare_numbers(const json::value& a, const json::value& b) {
  const bool a_int = a.is_int64() || a.is_uint64();
  const bool b_int = b.is_int64() || b.is_uint64();
  if (a_int && b_int) {
    const bool a_neg = a.is_int64() && a.get_int64() < 0;
    const bool b_neg = b.is_int64() && b.get_int64() < 0;
    if (a_neg != b_neg) return a_neg ? -1 : 1;
    if (a_neg) return a.get_int64() < b.get_int64() ? -1 : a.get_int64() > b.get_int64() ? 1 : 0;
    const auto ua = a.is_int64() ? static_cast<std::uint64_t>(a.get_int64()) : a.get_uint64();
    const auto ub = b.is_int64() ? static_cast<std::uint64_t>(b.get_int64()) : b.get_uint64();
    return ua < ub ? -1 : ua > ub ? 1 : 0;
  }
  if (a_int) return compare_integer_double(a, b.get_double());
  if (b_int) return -compare_integer_double(b, a.get_double());
  const double da = a.get_double(), db = b.get_double();
  return da < db ? -1 : da > db ? 1 : 0;
}

// Equality with numbers compared by value (1 == 1.0), as JSON Schema requires.
bool json_equal(const json::value& a, const json::value& b) {
  if (is_number(a) && is_number(b)) return compare_numbers(a, b) == 0;
  return a == b;
}

// Counts code points, not bytes, for min/maxLength.
std::size_t utf8_length(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::optional<std::uint64_t> count_of(const json::object& schema, std::string_view key) {
  const auto* v = schema.if_contains(key);
  if (v == nullptr || !is_number(*v)) return std::nullopt;
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64()) return v->get_int64() < 0 ? 0 : static_cast<std::uint64_t>(v->get_int64());
  const double d = v->get_double();
  if (!(d > 0)) return 0;
  return d >= 1.8e19 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(d);
}

std::optional<SchemaViolation> check(const json::value& schema_v, const json::value& v,
                                     const std::string& path) {
  if (schema_v.is_bool()) {
    if (schema_v.get_bool()) return std::nullopt;
    return SchemaViolation{path, "no value is allowed here"};
  }
  if (!schema_v.is_object()) return std::nullopt;
  const auto& schema = schema_v.get_object();
  auto fail = [&](std::string msg) { return SchemaViolation{path, std::move(msg)}; };

  if (const auto* type = schema.if_contains("type")) {
    bool ok = false;
    if (type->is_string()) {
      ok = matches_type(type->get_string(), v);
    } else if (type->is_array()) {
      for (const auto& t : type->get_array())
        ok = ok || (t.is_string() && matches_type(t.get_string(), v));
    }
    if (!ok) return fail("type: expected " + json::serialize(*type));
  }
  if (const auto* c = schema.if_contains("const"); c != nullptr && !json_equal(*c, v)) {
    return fail("const: expected " + json::serialize(*c));
  }
  if (const auto* e = schema.if_contains("enum"); e != nullptr && e->is_array()) {
    bool found = false;
    for (const auto& option : e->get_array()) found = found || json_equal(option, v);
    if (!found) return fail("enum: not one of " + json::serialize(*e));
  }
  if (v.is_string()) {
    std::size_t len = utf8_length(v.get_string());
    if (auto min = count_of(schema, "minLength"); min && len < *min) {
      return fail("minLength: shorter than " + std::to_string(*min));
    }
    if (auto max = count_of(schema, "maxLength"); max && len > *max) {
      return fail("maxLength: longer than " + std::to_string(*max));
    }
  }
  if (is_number(v)) {
    if (const auto* min = schema.if_contains("minimum");
        min != nullptr && is_number(*min) && compare_numbers(v, *min) < 0) {
      return fail("minimum: below " + json::serialize(*min));
    }
    if (const auto* max = schema.if_contains("maximum");
        max != nullptr && is_number(*max) && compare_numbers(v, *max) > 0) {
      return fail("maximum: above " + json::serialize(*max));
    }
  }
  if (v.is_array()) {
    const auto& arr = v.get_array();
    if (auto min = count_of(schema, "minItems"); min && arr.size() < *min) {
      return fail("minItems: fewer than " + std::to_string(*min));
    }
    if (auto max = count_of(schema, "maxItems"); max && arr.size() > *max) {
      return fail("maxItems: more than " + std::to_string(*max));
    }
    if (const auto* items = schema.if_contains("items")) {
      for (std::size_t i = 0; i < arr.size(); ++i) {
        if (auto bad = check(*items, arr[i], path + "[" + std::to_string(i) + "]")) return bad;
      }
    }
  }
  if (v.is_object()) {
    const auto& obj = v.get_object();
    const json::object* props = nullptr;
    if (const auto* p = schema.if_contains("properties"); p != nullptr && p->is_object()) {
      props = &p->get_object();
    }
    if (const auto* req = schema.if_contains("required"); req != nullptr && req->is_array()) {
      for (const auto& name : req->get_array()) {
        if (name.is_string() && !obj.contains(name.get_string())) {
          return fail("required: missing property \"" + std::string(name.get_string()) + "\"");
        }
      }
    }
    const auto* additional = schema.if_contains("additionalProperties");
    for (const auto& kv : obj) {
      std::string child = path + "." + std::string(kv.key());
      const json::value* sub = props != nullptr ? props->if_contains(kv.key()) : nullptr;
      if (sub != nullptr) {
        if (auto bad = check(*sub, kv.value(), child)) return bad;
      } else if (additional != nullptr) {
        if (additional->is_bool() && !additional->get_bool()) {
          return SchemaViolation{child, "additionalProperties: not allowed"};
        }
        if (auto bad = check(*additional, kv.value(), child)) return bad;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<SchemaViolation> validate(const json::value& schema, const json::value& instance) {
  return check(schema, instance, "$");
}

}  // namespace toolwarden::protocol
