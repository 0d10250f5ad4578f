// toolwarden: a per-user daemon that lets AI agents act on a developer's machine under policy.
#include "daemon/cli.hpp"

#if defined(TOOLWARDEN_STATIC_PIE)
#include <nss.h>
#endif

int main(int argc, char** argv) {
#if defined(TOOLWARDEN_STATIC_PIE)
  // A static glibc resolves `files` and `dns` itself but would dlopen any other NSS module that
  // /etc/nsswitch.conf names (mdns, resolve, myhostname…), loading a second, shared libc into
  // this process. Host lookups (the egress proxy's) are pinned to the two built-in services.
  if (__nss_configure_lookup("hosts", "files dns") != 0) return 70;  // EX_SOFTWARE
#endif
  return toolwarden::daemon::run_cli(argc, argv);
}
