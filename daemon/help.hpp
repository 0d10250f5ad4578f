// --help texts, one per command; the single source that the man page is generated from.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace toolwarden::daemon {

struct HelpTopic {
  std::string_view name;  // "" for the overview, "serve", "job create", ...
  std::string_view text;  // without the common options, which every command appends
};

/// The help of `topic` ("" for the overview, "serve", "job create", ...).
std::string help_text(std::string_view topic);

/// Every topic, the overview first, in the order the overview lists the commands.
std::span<const HelpTopic> help_topics();

/// The options every command takes (SPEC §3), as appended to each help text.
std::string_view common_options_help();

/// toolwarden(1) in troff (man macros): the overview, every command's help and the common
/// options verbatim, plus the sections only a manual has (files, environment, systemd).
std::string man_page(std::string_view version);

}  // namespace toolwarden::daemon
