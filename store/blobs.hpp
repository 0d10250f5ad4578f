// Content-addressed blobs of snapshots (SPEC §12), under <state dir>/blobs. The blob of SHA-256
// digest D (64 lowercase hex digits) is the file `D[0,2)/D[2,64)`, mode 0400. A blob is written
// under `tmp/`, made durable, then renamed into place, so a blob at its final name is always
// whole; content that is already stored is never written again, whichever snapshot names it.
// Readers still re-verify every byte (materialization hashes what it copies).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "sandbox/unique_fd.hpp"

namespace toolwarden::store {

class BlobStore {
 public:
  /// Opens `root`, creating it (0700, with `tmp/`) when missing. Throws StoreError when it is a
  /// symlink, not a directory, not the daemon's own or writable by group or others.
  explicit BlobStore(const std::filesystem::path& root);

  const std::filesystem::path& root() const { return root_; }
  int root_fd() const { return root_fd_.get(); }
  int tmp_fd() const { return tmp_fd_.get(); }

  /// 64 lowercase hex digits.
  static bool valid_digest(std::string_view sha256);

  /// True when the blob is stored as a regular file of `size` bytes.
  bool has(std::string_view sha256, std::uint64_t size) const;

  /// The blob opened for reading, never through a symlink; an empty fd (errno set) when absent.
  UniqueFd open(std::string_view sha256) const;

  /// Removes what a crashed capture left in `tmp/`.
  void remove_temporaries() const;

 private:
  std::filesystem::path root_;
  UniqueFd root_fd_;
  UniqueFd tmp_fd_;
};

/// The new blobs of one capture: each staged as a temp file, then all made durable with one
/// syncfs and renamed into place (instead of an fsync per file), then synced again so the names
/// are durable before the caller records a manifest that names them. Temp files of a batch that
/// is not committed are removed when it is destroyed.
class BlobBatch {
 public:
  explicit BlobBatch(const BlobStore& store) : store_(store) {}
  ~BlobBatch();
  BlobBatch(const BlobBatch&) = delete;
  BlobBatch& operator=(const BlobBatch&) = delete;

  /// Stages `data`, whose digest `sha256` the caller computed over these very bytes, unless the
  /// blob is stored or staged already. Returns the bytes staged (0 when deduplicated); nullopt
  /// with errno set when the temp file cannot be written.
  std::optional<std::uint64_t> stage(std::string_view sha256, std::string_view data);

  /// Makes every staged blob durable and puts it in place. False with errno set on failure.
  bool commit();

  std::uint64_t staged_bytes() const { return bytes_; }

 private:
  struct Staged {
    std::string temp_name;
    std::string sha256;
  };
  void discard();

  const BlobStore& store_;
  std::vector<Staged> staged_;
  std::unordered_set<std::string> digests_;
  std::uint64_t bytes_ = 0;
};

}  // namespace toolwarden::store
