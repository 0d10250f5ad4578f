// Snapshot blobs and probe records (SPEC §12, schema 3): blobs are content-addressed, whole or
// absent, read-only and stored once; plans and runs cannot be changed; reservations add up.
#include "store/probe_store.hpp"

#include <SQLiteCpp/Transaction.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "store/blobs.hpp"
#include "store/digest.hpp"
#include "store/store.hpp"

namespace toolwarden::store {
namespace {
namespace fs = std::filesystem;

class ProbeStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tw-probestore-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::owner_all);
  }
  void TearDown() override {
    // Blobs and their directories are read-only for everyone but the owner.
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    fs::remove_all(dir_);
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static std::size_t entries(const fs::path& p) {
    return static_cast<std::size_t>(
        std::distance(fs::directory_iterator(p), fs::directory_iterator{}));
  }

  fs::path dir_;
};

TEST_F(ProbeStoreTest, CommittedBlobIsContentAddressedReadOnlyAndWhole) {
  BlobStore blobs(dir_ / "blobs");
  const std::string data = "hello blob\n";
  const std::string sha = sha256_hex(data);
  {
    BlobBatch batch(blobs);
    auto staged = batch.stage(sha, data);
    ASSERT_TRUE(staged);
    EXPECT_EQ(*staged, data.size());
    EXPECT_FALSE(blobs.has(sha, data.size())) << "visible before commit";
    ASSERT_TRUE(batch.commit());
  }
  const fs::path file = dir_ / "blobs" / sha.substr(0, 2) / sha.substr(2);
  ASSERT_TRUE(fs::is_regular_file(fs::symlink_status(file)));
  EXPECT_EQ(read(file), data);
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0400u);
  EXPECT_TRUE(blobs.has(sha, data.size()));
  EXPECT_FALSE(blobs.has(sha, data.size() + 1));
  EXPECT_EQ(entries(dir_ / "blobs" / "tmp"), 0u) << "temp files left after a commit";
  UniqueFd fd = blobs.open(sha);
  ASSERT_TRUE(fd);
}

TEST_F(ProbeStoreTest, SameContentIsStoredOnce) {
  BlobStore blobs(dir_ / "blobs");
  const std::string data(100000, 'x');
  const std::string sha = sha256_hex(data);
  {
    BlobBatch first(blobs);
    EXPECT_EQ(first.stage(sha, data).value(), data.size());
    EXPECT_EQ(first.stage(sha, data).value(), 0u) << "staged twice within one batch";
    ASSERT_TRUE(first.commit());
  }
  BlobBatch second(blobs);
  EXPECT_EQ(second.stage(sha, data).value(), 0u) << "a stored blob was written again";
  EXPECT_EQ(second.staged_bytes(), 0u);
  ASSERT_TRUE(second.commit());
}

TEST_F(ProbeStoreTest, UncommittedBatchLeavesNothing) {
  BlobStore blobs(dir_ / "blobs");
  const std::string data = "never committed";
  const std::string sha = sha256_hex(data);
  {
    BlobBatch batch(blobs);
    ASSERT_TRUE(batch.stage(sha, data));
    EXPECT_EQ(entries(dir_ / "blobs" / "tmp"), 1u);
  }
  EXPECT_EQ(entries(dir_ / "blobs" / "tmp"), 0u);
  EXPECT_FALSE(blobs.has(sha, data.size()));
}

TEST_F(ProbeStoreTest, TemporariesOfACrashAreRemoved) {
  BlobStore blobs(dir_ / "blobs");
  std::ofstream(dir_ / "blobs" / "tmp" / "leftover.123.1") << "half";
  blobs.remove_temporaries();
  EXPECT_EQ(entries(dir_ / "blobs" / "tmp"), 0u);
}

TEST_F(ProbeStoreTest, SymlinkedBlobIsNeverOpened) {
  BlobStore blobs(dir_ / "blobs");
  const std::string data = "real";
  const std::string sha = sha256_hex(data);
  fs::create_directories(dir_ / "blobs" / sha.substr(0, 2));
  std::ofstream(dir_ / "outside") << data;
  fs::create_symlink(dir_ / "outside", dir_ / "blobs" / sha.substr(0, 2) / sha.substr(2));
  EXPECT_FALSE(blobs.has(sha, data.size()));
  EXPECT_FALSE(blobs.open(sha));
  EXPECT_FALSE(blobs.open("../../etc/passwd"));
}

TEST_F(ProbeStoreTest, BlobRootMustBeAPrivateRealDirectory) {
  fs::create_directories(dir_ / "elsewhere");
  fs::create_symlink(dir_ / "elsewhere", dir_ / "linked");
  EXPECT_THROW(BlobStore(dir_ / "linked"), StoreError);
  fs::create_directories(dir_ / "open");
  fs::permissions(dir_ / "open", fs::perms::all);
  EXPECT_THROW(BlobStore(dir_ / "open"), StoreError);
}

class ProbeRecordsTest : public ProbeStoreTest {
 protected:
  void SetUp() override {
    ProbeStoreTest::SetUp();
    store_.emplace(dir_ / "store.db");
  }
  void TearDown() override {
    store_.reset();
    ProbeStoreTest::TearDown();
  }
  template <class Fn>
  void in_tx(Fn fn) {
    SQLite::Transaction tx(store_->db(), SQLite::TransactionBehavior::IMMEDIATE);
    fn(*store_);
    tx.commit();
  }
  void add_probe() {
    in_tx([](Store& s) {
      insert_snapshot(s, SnapshotRecord{"snap_1", "/wt", std::nullopt, 1, 3, 3, "m", 1},
                      {SnapshotFile{"a.txt", false, 0644, 3, sha256_hex("abc")},
                       SnapshotFile{"link", true, 0, 0, {}}});
      insert_probe(s, ProbeRecord{"probe_1", "snap_1", std::string("job_1"), "{}", "d", 2});
    });
  }
  std::optional<Store> store_;
};

TEST_F(ProbeRecordsTest, SnapshotManifestRoundTrips) {
  add_probe();
  auto snap = find_snapshot(*store_, "snap_1");
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->worktree, "/wt");
  EXPECT_FALSE(snap->job_id);
  auto files = snapshot_files(*store_, "snap_1");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, "a.txt");
  EXPECT_EQ(files[0].mode, 0644u);
  EXPECT_FALSE(files[0].symlink);
  EXPECT_EQ(files[1].path, "link");
  EXPECT_TRUE(files[1].symlink);
  EXPECT_TRUE(files[1].sha256.empty());
  auto probe = find_probe(*store_, "probe_1");
  ASSERT_TRUE(probe);
  EXPECT_EQ(probe->job_id.value_or(""), "job_1");
}

TEST_F(ProbeRecordsTest, PlansAndRunsCannotBeChangedOrDeleted) {
  add_probe();
  in_tx([](Store& s) {
    insert_probe_run(s,
                     ProbeRunRecord{"run_1", "probe_1", "{}", std::string("out\0put", 7), "", 3});
  });
  auto runs = probe_runs(*store_, "probe_1");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].stdout_data, std::string("out\0put", 7)) << "output bytes kept exactly";
  EXPECT_THROW(store_->db().exec("UPDATE probes SET plan_json = '{\"x\":1}'"), SQLite::Exception);
  EXPECT_THROW(store_->db().exec("DELETE FROM probes"), SQLite::Exception);
  EXPECT_THROW(store_->db().exec("UPDATE probe_runs SET run_json = '{}' "), SQLite::Exception);
  EXPECT_THROW(store_->db().exec("DELETE FROM probe_runs"), SQLite::Exception);
  EXPECT_THROW(store_->db().exec("UPDATE snapshot_files SET sha256 = 'x'"), SQLite::Exception);
}

TEST_F(ProbeRecordsTest, ReservationsAddUpAndRelease) {
  add_probe();
  EXPECT_EQ(reserved_bytes(*store_), 0);
  in_tx([](Store& s) {
    insert_reservation(s, Reservation{"run_a", "probe_1", std::nullopt, 1000, 1});
    insert_reservation(s, Reservation{"run_b", "probe_1", std::string("job_1"), 24, 2});
  });
  EXPECT_EQ(reserved_bytes(*store_), 1024);
  EXPECT_EQ(reservations(*store_).size(), 2u);
  bool removed = false;
  in_tx([&](Store& s) { removed = delete_reservation(s, "run_a"); });
  EXPECT_TRUE(removed);
  in_tx([&](Store& s) { removed = delete_reservation(s, "run_a"); });
  EXPECT_FALSE(removed);
  EXPECT_EQ(reserved_bytes(*store_), 24);
  EXPECT_THROW(in_tx([](Store& s) {
                 insert_reservation(s, Reservation{"run_c", "probe_1", std::nullopt, -1, 1});
               }),
               SQLite::Exception);
}

}  // namespace
}  // namespace toolwarden::store
