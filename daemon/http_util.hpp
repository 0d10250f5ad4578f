// Small HTTP helpers shared by the MCP and admin listeners (Beast stays inside daemon/).
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string>
#include <string_view>

namespace toolwarden::daemon {

namespace http = boost::beast::http;
using Response = http::response<http::string_body>;

inline constexpr std::size_t kHeaderLimit = 8 * 1024;

Response make_response(http::status status, std::string body, std::string_view content_type,
                       bool keep_alive);

/// ASCII lower-case copy.
std::string lowercase(std::string_view s);
/// The media type of a Content-Type value, lower-cased, without parameters.
std::string media_type(std::string_view content_type);

}  // namespace toolwarden::daemon
