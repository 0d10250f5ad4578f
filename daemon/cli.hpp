// The command line of SPEC §3. Exit status: 0 success, 1 refused or failed, 2 bad usage.
#pragma once

namespace toolwarden::daemon {

int run_cli(int argc, char** argv);

}  // namespace toolwarden::daemon
