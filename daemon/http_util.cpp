#include "daemon/http_util.hpp"

#include <algorithm>

#include "daemon/version.hpp"

namespace toolwarden::daemon {

Response make_response(http::status status, std::string body, std::string_view content_type,
                       bool keep_alive) {
  Response res{status, 11};
  res.set(http::field::server, "toolwarden/" TOOLWARDEN_VERSION);
  res.set(http::field::cache_control, "no-store");
  if (!content_type.empty()) res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  return out;
}

std::string media_type(std::string_view v) {
  auto semi = v.find(';');
  if (semi != std::string_view::npos) v = v.substr(0, semi);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return lowercase(v);
}

}  // namespace toolwarden::daemon
