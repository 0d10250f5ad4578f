// toolwarden: a per-user daemon that lets AI agents act on a developer's machine under policy.
#include <exception>
#include <iostream>

#include "daemon/cli.hpp"
#include "store/digest.hpp"

int main(int argc, char** argv) {
  try {
    toolwarden::store::init_crypto();
  } catch (const std::exception& e) {
    std::cerr << "toolwarden: " << e.what() << "\n";
    return 1;
  }
  return toolwarden::daemon::run_cli(argc, argv);
}
