// --help texts, one per command; the single source that the man page is generated from.
#pragma once

#include <string>
#include <string_view>

namespace toolwarden::daemon {

/// The help of `topic` ("" for the overview, "serve", "job create", ...).
std::string help_text(std::string_view topic);

}  // namespace toolwarden::daemon
