// toolwarden_man OUTPUT: writes toolwarden(1) at build time (daemon/CMakeLists.txt), from the
// same texts `toolwarden --help` prints.
#include <fstream>
#include <iostream>

#include "daemon/help.hpp"
#include "daemon/version.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: toolwarden_man OUTPUT\n";
    return 2;
  }
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out << toolwarden::daemon::man_page(TOOLWARDEN_VERSION);
  out.close();
  if (!out) {
    std::cerr << "toolwarden_man: cannot write " << argv[1] << "\n";
    return 1;
  }
  return 0;
}
