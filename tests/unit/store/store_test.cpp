#include "store/store.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <filesystem>
#include <future>

#include "store/clock.hpp"
#include "store/digest.hpp"
#include "store/writer.hpp"

namespace toolwarden::store {
namespace {
namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tw-store-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    file_ = dir_ / "store.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  Job make_job(const std::string& id) {
    Job j;
    j.id = id;
    j.token_sha256 = sha256_hex("token-" + id);
    j.worktree = "/tmp";
    j.grant_json = "{}";
    j.created_at = unix_now();
    j.expires_at = j.created_at + 60;
    return j;
  }

  void raw(const std::string& sql) {
    SQLite::Database db(file_.string(), SQLite::OPEN_READWRITE);
    db.exec(sql);
  }

  fs::path dir_;
  fs::path file_;
};

TEST_F(StoreTest, OpensInWalModeWithSchemaVersion) {
  Store s(file_);
  EXPECT_EQ(s.db().execAndGet("PRAGMA journal_mode").getString(), "wal");
  EXPECT_EQ(s.db().execAndGet("PRAGMA user_version").getInt(), Store::kSchemaVersion);
}

TEST_F(StoreTest, RefusesANewerSchema) {
  { Store s(file_); }
  raw("PRAGMA user_version=" + std::to_string(Store::kSchemaVersion + 1));
  EXPECT_THROW(Store s(file_), StoreError);
}

TEST_F(StoreTest, AVersionOneStoreMigratesAndKeepsItsJobsAndChain) {
  {
    Store s(file_);
    s.insert_job(make_job("job_old"));
    s.append_event(NewEvent{"job_old", std::nullopt, "job.created", {}});
  }
  // What version 1 was: no tool_trust table, no probe tables.
  raw("DROP TABLE probe_reservations; DROP TABLE probe_runs; DROP TABLE probes; "
      "DROP TABLE snapshot_files; DROP TABLE snapshots; DROP TABLE tool_trust; "
      "PRAGMA user_version=1");
  Store s(file_);
  EXPECT_EQ(s.db().execAndGet("PRAGMA user_version").getInt(), Store::kSchemaVersion);
  EXPECT_TRUE(s.find_job("job_old").has_value());
  EXPECT_TRUE(s.verify_chain().ok);
  EXPECT_FALSE(s.tool_trust("/w", "fmt").has_value());
}

TEST_F(StoreTest, AVersionTwoStoreGainsTheProbeTables) {
  {
    Store s(file_);
    s.set_tool_trust("/w", "fmt", "aa", 1);
    s.append_event(NewEvent{std::nullopt, std::nullopt, "tool.trusted", {}});
  }
  raw("DROP TABLE probe_reservations; DROP TABLE probe_runs; DROP TABLE probes; "
      "DROP TABLE snapshot_files; DROP TABLE snapshots; PRAGMA user_version=2");
  Store s(file_);
  EXPECT_EQ(s.db().execAndGet("PRAGMA user_version").getInt(), 3);
  EXPECT_EQ(s.tool_trust("/w", "fmt"), "aa");
  EXPECT_TRUE(s.verify_chain().ok);
  EXPECT_EQ(s.db().execAndGet("SELECT COUNT(*) FROM probe_reservations").getInt(), 0);
}

TEST_F(StoreTest, ToolTrustIsOneHashPerWorktreeAndTool) {
  Store s(file_);
  s.set_tool_trust("/w", "fmt", "aa", 1);
  s.set_tool_trust("/w", "lint", "bb", 1);
  s.set_tool_trust("/other", "fmt", "cc", 1);
  EXPECT_EQ(s.tool_trust("/w", "fmt"), "aa");
  s.set_tool_trust("/w", "fmt", "dd", 2);  // re-trusted after an edit
  EXPECT_EQ(s.tool_trust("/w", "fmt"), "dd");
  EXPECT_EQ(s.tool_trust("/other", "fmt"), "cc");
  EXPECT_FALSE(s.tool_trust("/w", "gen").has_value());
}

TEST_F(StoreTest, SequenceNumbersIncreaseAndSurviveReopen) {
  {
    Store s(file_);
    s.insert_job(make_job("job_a"));
    EXPECT_EQ(s.next_sequence("job_a"), 1);
    EXPECT_EQ(s.next_sequence("job_a"), 2);
  }
  Store s(file_);
  EXPECT_EQ(s.next_sequence("job_a"), 3);
  EXPECT_THROW(s.next_sequence("job_missing"), std::exception);
}

TEST_F(StoreTest, ChainVerifiesAndContinuesAcrossReopen) {
  {
    Store s(file_);
    s.append_event({std::nullopt, std::nullopt, "a", {{"k", 1}}});
    s.append_event({"job_x", 1, "b", {{"k", 2}}});
  }
  Store s(file_);
  auto e = s.append_event({"job_x", 2, "c", {}});
  EXPECT_EQ(e.id, 3);
  auto r = s.verify_chain();
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.events, 3);
}

TEST_F(StoreTest, AReadOnlyConnectionReadsWhileTheWriteLockIsHeld) {
  Store writer(file_);
  writer.append_event({"job_x", 1, "a", {}});
  // An outside process's write lock (BEGIN EXCLUSIVE is IMMEDIATE in WAL mode) ...
  SQLite::Database outside(file_.string(), SQLite::OPEN_READWRITE);
  outside.exec("BEGIN EXCLUSIVE");
  outside.exec(
      "INSERT INTO tool_trust (worktree, name, sha256, trusted_at) VALUES ('w','n','h',1)");
  // ... does not stop a reader, which sees the last commit and verifies it.
  Store reader(file_, Store::ReadOnly{});
  reader.db().setBusyTimeout(100);
  auto r = reader.read_snapshot([](Store& st) { return st.verify_chain(); });
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.events, 1);
  EXPECT_EQ(reader.list_events(std::nullopt, 10).size(), 1u);
  outside.exec("ROLLBACK");
  // A read-only connection cannot write, whatever a caller tries, even with the lock free.
  EXPECT_ANY_THROW(reader.append_event({"job_x", 2, "b", {}}));
  EXPECT_EQ(writer.verify_chain().events, 1);
}

TEST_F(StoreTest, AReadOnlyConnectionRefusesAnotherSchemaOrAMissingFile) {
  EXPECT_THROW(Store(file_, Store::ReadOnly{}), StoreError);  // nothing is created
  EXPECT_FALSE(fs::exists(file_));
  { Store s(file_); }
  raw("PRAGMA user_version=" + std::to_string(Store::kSchemaVersion - 1));
  EXPECT_THROW(Store(file_, Store::ReadOnly{}), StoreError);
}

TEST_F(StoreTest, VerifyNamesAnEditedRow) {
  {
    Store s(file_);
    for (int i = 0; i < 5; ++i) s.append_event({std::nullopt, std::nullopt, "e", {{"i", i}}});
  }
  raw("DROP TRIGGER events_no_update; UPDATE events SET data='{\"i\":99}' WHERE id=3");
  Store s(file_);
  auto r = s.verify_chain();
  EXPECT_FALSE(r.ok);
  ASSERT_TRUE(r.first_bad_event);
  EXPECT_EQ(*r.first_bad_event, 3);
}

TEST_F(StoreTest, VerifyNamesADeletedRow) {
  {
    Store s(file_);
    for (int i = 0; i < 5; ++i) s.append_event({std::nullopt, std::nullopt, "e", {{"i", i}}});
  }
  raw("DROP TRIGGER events_no_delete; DELETE FROM events WHERE id=2");
  Store s(file_);
  auto r = s.verify_chain();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(*r.first_bad_event, 3);
}

TEST_F(StoreTest, VerifyDetectsTheLastRowDeleted) {
  {
    Store s(file_);
    for (int i = 0; i < 3; ++i) s.append_event({std::nullopt, std::nullopt, "e", {{"i", i}}});
  }
  raw("DROP TRIGGER events_no_delete; DELETE FROM events WHERE id=3");
  Store s(file_);
  auto r = s.verify_chain();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(*r.first_bad_event, 3);
}

TEST_F(StoreTest, VerifyDetectsReorderedRows) {
  {
    Store s(file_);
    for (int i = 0; i < 4; ++i)
      s.append_event({std::nullopt, std::nullopt, "e" + std::to_string(i), {}});
  }
  // Swap the contents of rows 2 and 3, keeping ids in place.
  raw("DROP TRIGGER events_no_update;"
      "UPDATE events SET id = -2 WHERE id = 2; UPDATE events SET id = 2 WHERE id = 3;"
      "UPDATE events SET id = 3 WHERE id = -2;");
  Store s(file_);
  auto r = s.verify_chain();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(*r.first_bad_event, 2);
}

TEST_F(StoreTest, EventsAreAppendOnly) {
  Store s(file_);
  s.append_event({std::nullopt, std::nullopt, "e", {}});
  EXPECT_THROW(s.db().exec("UPDATE events SET type='x'"), SQLite::Exception);
  EXPECT_THROW(s.db().exec("DELETE FROM events"), SQLite::Exception);
}

TEST_F(StoreTest, CanonicalJsonSortsKeys) {
  auto a = boost::json::parse(R"({"b":1,"a":{"d":2,"c":[3,{"f":1,"e":2}]}})");
  EXPECT_EQ(canonical_json(a), R"({"a":{"c":[3,{"e":2,"f":1}],"d":2},"b":1})");
}

TEST_F(StoreTest, WriterGroupsItemsAndIsolatesAFailingOne) {
  Store s(file_);
  s.insert_job(make_job("job_w"));
  Writer w(std::move(s));
  constexpr int kItems = 200;
  std::vector<std::promise<std::int64_t>> done(kItems);
  std::atomic<int> failures{0};
  for (int i = 0; i < kItems; ++i) {
    auto seq = std::make_shared<std::int64_t>(0);
    w.submit(
        [i, seq](Store& st) {
          *seq = st.next_sequence("job_w");
          st.append_event({"job_w", *seq, "tool.requested", {}});
          if (i == 7) throw std::runtime_error("boom");  // rolls back only this item
        },
        [&, i, seq](std::exception_ptr e) {
          if (e) ++failures;
          done[i].set_value(e ? -1 : *seq);
        });
  }
  std::vector<std::int64_t> seqs;
  for (auto& d : done) seqs.push_back(d.get_future().get());
  w.stop();
  EXPECT_EQ(failures.load(), 1);
  EXPECT_EQ(seqs[7], -1);
  // Strictly increasing among the committed items, with the failed item's number unused.
  std::int64_t last = 0;
  for (int i = 0; i < kItems; ++i) {
    if (i == 7) continue;
    EXPECT_GT(seqs[i], last);
    last = seqs[i];
  }
  Store again(file_);
  auto r = again.verify_chain();
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.events, kItems - 1);
}

TEST(EventHashTest, IsTheHashOfTheCanonicalRowByteForByte) {
  // event_hash writes the canonical JSON directly; stores written before must still verify,
  // so it must equal the hash of canonical_json over the same fields.
  auto reference = [](const Event& e) {
    boost::json::object fields;
    fields["id"] = e.id;
    fields["job_id"] = e.job_id ? boost::json::value(*e.job_id) : boost::json::value(nullptr);
    fields["seq"] = e.seq ? boost::json::value(*e.seq) : boost::json::value(nullptr);
    fields["type"] = e.type;
    fields["ts"] = e.ts;
    fields["data"] = e.data;
    return sha256_hex(e.prev_hash + "\n" + canonical_json(fields));
  };
  Event e;
  e.id = 1;
  e.type = "job.created";
  e.ts = "2026-11-29T20:00:00Z";
  e.data = "{}";
  e.prev_hash = Store::kGenesisHash;
  EXPECT_EQ(event_hash(e), reference(e));
  e.id = 9007199254740993;
  e.job_id = "job_0123456789abcdef";
  e.seq = -1;
  e.type = "tool.completed";
  e.data = R"({"args_sha256":"x","code":"OK","note":"quote \" backslash \\ \u0001 \u2028 é 😀"})";
  EXPECT_EQ(event_hash(e), reference(e));
  e.data = std::string("raw control \x01\x1f and \x7f and a NUL ") + '\0' + " inside";
  e.type = "weird \"type\"\n";
  EXPECT_EQ(event_hash(e), reference(e));
}

TEST(DigestTest, Sha256KnownAnswer) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 h;
  h.update("a");
  h.update("bc");
  EXPECT_EQ(h.finish_hex(), sha256_hex("abc"));
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
}

}  // namespace
}  // namespace toolwarden::store
