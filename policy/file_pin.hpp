// A file's identity and content digest at pinning time (SPEC §9): a replaced file (new inode),
// a touched one (new mtime) or an edited one (new digest) no longer matches its pin.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace toolwarden::policy {

struct FilePin {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  std::string sha256;
  bool operator==(const FilePin&) const = default;
};

}  // namespace toolwarden::policy
