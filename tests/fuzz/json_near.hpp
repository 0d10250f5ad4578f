// JSON equality for round-trip checks. Boost.JSON 1.81 parses some long numbers a few ulps
// away from the nearest double (e.g. its own output "1.8446748446744074E25"; 1.83 added
// number_precision::precise), so a double read back from text may be a close neighbour.
#pragma once

#include <boost/json/value.hpp>
#include <cmath>

namespace toolwarden::fuzz {

/// Equal, except that doubles may differ in their last few bits (and NaN equals NaN: Boost.JSON
/// 1.81 reads "0e999" as NaN).
inline bool json_near(const boost::json::value& a, const boost::json::value& b) {
  if (a.is_double() && b.is_double()) {
    const double x = a.get_double(), y = b.get_double();
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
    return x == y || std::fabs(x - y) <= 1e-14 * std::fmax(std::fabs(x), std::fabs(y));
  }
  if (a.is_array() && b.is_array()) {
    const auto &x = a.get_array(), &y = b.get_array();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!json_near(x[i], y[i])) return false;
    return true;
  }
  if (a.is_object() && b.is_object()) {
    const auto &x = a.get_object(), &y = b.get_object();
    if (x.size() != y.size()) return false;
    for (const auto& kv : x) {
      const auto* other = y.if_contains(kv.key());
      if (other == nullptr || !json_near(kv.value(), *other)) return false;
    }
    return true;
  }
  return a == b;
}

}  // namespace toolwarden::fuzz
