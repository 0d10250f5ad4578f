// toolwarden: a per-user daemon that lets AI agents act on a developer's machine under policy.
#include "daemon/cli.hpp"

int main(int argc, char** argv) { return toolwarden::daemon::run_cli(argc, argv); }
