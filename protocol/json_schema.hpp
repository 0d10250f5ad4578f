// A validator for the JSON Schema subset tool inputs use (SPEC §11): type, properties,
// required, additionalProperties, enum, const, minLength/maxLength, minimum/maximum,
// minItems/maxItems, items. Unknown keywords are ignored, as JSON Schema does.
#pragma once

#include <boost/json/value.hpp>
#include <optional>
#include <string>

namespace toolwarden::protocol {

struct SchemaViolation {
  std::string path;     // JSON path of the failing value, e.g. "$.path" or "$.items[2]"
  std::string message;  // what is wrong, naming the keyword
};

/// nullopt when `instance` satisfies `schema`; else the first violation found.
std::optional<SchemaViolation> validate(const boost::json::value& schema,
                                        const boost::json::value& instance);

}  // namespace toolwarden::protocol
