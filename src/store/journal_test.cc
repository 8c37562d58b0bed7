#include "store/journal.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "store/memory_env.h"
#include "store/posix_env.h"

namespace drover::store {
namespace {

using Records = std::vector<std::string>;

constexpr char kPath[] = "/state/journal";

// Opens the journal at kPath in `env`, asserting success.
std::unique_ptr<Journal> MustOpen(Env& env, JournalReplay* replay,
                                  const std::string& path = kPath) {
  auto journal = Journal::Open(env, path, replay);
  EXPECT_TRUE(journal.ok()) << journal.status().ToString();
  return journal.ok() ? std::move(journal).value() : nullptr;
}

Records Replayed(Env& env, const std::string& path = kPath) {
  JournalReplay replay;
  auto journal = MustOpen(env, &replay, path);
  return replay.records;
}

// Appends `records` and syncs them as one batch; returns each callback's status.
std::vector<Status> AppendAll(Journal& journal, const Records& records) {
  std::vector<Status> results(records.size(), Internal("callback never ran"));
  for (size_t i = 0; i < records.size(); ++i) {
    journal.Append(records[i], [&results, i](Status s) { results[i] = std::move(s); });
  }
  (void)journal.Sync();
  return results;
}

void ExpectAllOk(const std::vector<Status>& results) {
  for (const auto& s : results) EXPECT_TRUE(s.ok()) << s.ToString();
}

std::string Frame(const std::string& record) {
  std::string out;
  Journal::EncodeRecord(record, &out);
  return out;
}

TEST(JournalTest, RoundTripKeepsRecordsInOrder) {
  MemoryEnv env;
  const Records records = {"first", "", std::string("bin\0ary\xff", 8), std::string(5000, 'x')};
  {
    JournalReplay replay;
    auto journal = MustOpen(env, &replay);
    EXPECT_TRUE(replay.records.empty());
    ExpectAllOk(AppendAll(*journal, records));
  }
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  EXPECT_EQ(replay.records, records);
  EXPECT_EQ(replay.discarded_bytes, 0u);
  EXPECT_EQ(replay.valid_bytes, journal->durable_bytes());
  // Appending after a reopen continues the same log.
  ExpectAllOk(AppendAll(*journal, {"fifth"}));
  Records expected = records;
  expected.push_back("fifth");
  journal.reset();
  EXPECT_EQ(Replayed(env), expected);
}

TEST(JournalTest, NewJournalNameSurvivesACrash) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ExpectAllOk(AppendAll(*journal, {"a"}));
  env.SimulateCrash();
  EXPECT_EQ(Replayed(env), Records{"a"});
}

TEST(JournalTest, GroupSyncMakesTheWholeBatchDurableWithOneFsync) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  int completed = 0;
  Records records;
  for (int i = 0; i < 100; ++i) {
    records.push_back("record-" + std::to_string(i));
    journal->Append(records.back(), [&completed](Status s) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      ++completed;
    });
  }
  EXPECT_EQ(completed, 0) << "callbacks must wait for the fsync";
  EXPECT_EQ(journal->pending_records(), 100u);
  const uint64_t ops_before = env.MutatingOps();
  ASSERT_TRUE(journal->Sync().ok());
  EXPECT_EQ(completed, 100);
  EXPECT_EQ(env.MutatingOps() - ops_before, 2u) << "one write and one fsync for the batch";
  EXPECT_EQ(journal->pending_records(), 0u);
  // An empty Sync touches nothing.
  ASSERT_TRUE(journal->Sync().ok());
  EXPECT_EQ(env.MutatingOps() - ops_before, 2u);
  env.SimulateCrash();
  EXPECT_EQ(Replayed(env), records);
}

TEST(JournalTest, UnsyncedAppendsAreLostInACrashAndSyncedOnesKept) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ExpectAllOk(AppendAll(*journal, {"durable"}));
  bool ran = false;
  journal->Append("never synced", [&ran](Status) { ran = true; });
  env.SimulateCrash();
  EXPECT_FALSE(ran);
  EXPECT_EQ(Replayed(env), Records{"durable"});
}

TEST(JournalTest, CallbackMayAppendAgain) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  journal->Append("a", [&journal](Status s) {
    ASSERT_TRUE(s.ok());
    journal->Append("b", [](Status) {});
  });
  ASSERT_TRUE(journal->Sync().ok());
  EXPECT_EQ(journal->pending_records(), 1u);
  ASSERT_TRUE(journal->Sync().ok());
  journal.reset();
  EXPECT_EQ(Replayed(env), (Records{"a", "b"}));
}

// Writes r1 r2 r3 durably and returns the file's bytes.
std::string ThreeRecordFile(MemoryEnv& env) {
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ExpectAllOk(AppendAll(*journal, {"record one", "record two", "record three"}));
  return env.ReadFile(kPath).value();
}

TEST(JournalTest, TornTailIsCutAtEveryPointInsideTheLastRecord) {
  MemoryEnv probe;
  const std::string full = ThreeRecordFile(probe);
  const size_t third = Frame("record one").size() + Frame("record two").size();
  ASSERT_EQ(full.size(), third + Frame("record three").size());
  // Every cut inside the last record's header (1..7 bytes) or payload.
  for (size_t cut = third + 1; cut < full.size(); ++cut) {
    SCOPED_TRACE("file cut at " + std::to_string(cut));
    MemoryEnv env;
    env.SetFile(kPath, full.substr(0, cut));
    JournalReplay replay;
    auto journal = MustOpen(env, &replay);
    EXPECT_EQ(replay.records, (Records{"record one", "record two"}));
    EXPECT_EQ(replay.discarded_bytes, cut - third);
    EXPECT_EQ(replay.valid_bytes, third);
    EXPECT_EQ(env.ReadFile(kPath).value().size(), third) << "the torn tail is truncated";
    // New records follow the good ones, not the garbage.
    ExpectAllOk(AppendAll(*journal, {"record four"}));
    journal.reset();
    EXPECT_EQ(Replayed(env), (Records{"record one", "record two", "record four"}));
  }
}

TEST(JournalTest, CorruptCrcEndsTheReplayThere) {
  MemoryEnv probe;
  const std::string full = ThreeRecordFile(probe);
  const size_t second = Frame("record one").size();
  const size_t third = second + Frame("record two").size();
  struct Case {
    size_t offset;  // byte to flip
    Records kept;
    uint64_t discarded;
  };
  const Case cases[] = {
      {third + 4, {"record one", "record two"}, full.size() - third},        // CRC of r3
      {third + 7, {"record one", "record two"}, full.size() - third},        // CRC of r3
      {full.size() - 1, {"record one", "record two"}, full.size() - third},  // payload of r3
      {second + 9, {"record one"}, full.size() - second},                    // payload of r2
      {second, {"record one"}, full.size() - second},                        // length of r2
      {0, {}, full.size()},                                                  // length of r1
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("byte flipped at " + std::to_string(c.offset));
    MemoryEnv env;
    std::string damaged = full;
    damaged[c.offset] = static_cast<char>(damaged[c.offset] ^ 0x20);
    env.SetFile(kPath, damaged);
    JournalReplay replay;
    auto journal = MustOpen(env, &replay);
    EXPECT_EQ(replay.records, c.kept);
    EXPECT_EQ(replay.discarded_bytes, c.discarded);
    EXPECT_EQ(env.ReadFile(kPath).value().size(), full.size() - c.discarded);
  }
}

TEST(JournalTest, ZeroFilledTailIsDiscarded) {
  // Some file systems extend a file with zeros when a crash beats the data.
  MemoryEnv probe;
  const std::string full = ThreeRecordFile(probe);
  MemoryEnv env;
  env.SetFile(kPath, full + std::string(4096, '\0'));
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  EXPECT_EQ(replay.records.size(), 3u);
  EXPECT_EQ(replay.discarded_bytes, 4096u);
}

TEST(JournalTest, TornWriteFromACrashIsRecovered) {
  MemoryEnv env;
  {
    JournalReplay replay;
    auto journal = MustOpen(env, &replay);
    ExpectAllOk(AppendAll(*journal, {"kept"}));
    journal->Append("torn record payload", [](Status) {});
    journal->Append("another", [](Status) {});
    // Write the batch but crash before its fsync has finished: only part of
    // the unsynced bytes reach the disk.
    env.FailSyncs(true);
    EXPECT_FALSE(journal->Sync().ok());
  }
  env.FailSyncs(false);
  env.SimulateCrash(/*keep_unsynced=*/13);
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  EXPECT_EQ(replay.records, Records{"kept"});
  EXPECT_EQ(replay.discarded_bytes, 13u);
}

TEST(JournalTest, FullDiskFailsTheBatchAndKeepsWhatWasDurable) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ExpectAllOk(AppendAll(*journal, {"before 1", "before 2"}));
  const uint64_t durable = journal->durable_bytes();

  env.SetFreeSpace(10);  // the next batch fits only partly
  auto results = AppendAll(*journal, {"does not fit", "nor this"});
  for (const auto& s : results) EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(env.ReadFile(kPath).value().size(), durable) << "the partial batch is cut off";
  EXPECT_TRUE(journal->broken().ok()) << "a full disk is not fatal";

  // Once there is room again the journal carries on.
  env.SetFreeSpace(std::nullopt);
  ExpectAllOk(AppendAll(*journal, {"after"}));
  env.SimulateCrash();
  EXPECT_EQ(Replayed(env), (Records{"before 1", "before 2", "after"}));
}

TEST(JournalTest, FailedFsyncBreaksTheJournalUntilReopened) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ExpectAllOk(AppendAll(*journal, {"ok"}));
  env.FailSyncs(true);
  auto results = AppendAll(*journal, {"lost?"});
  EXPECT_EQ(results[0].code(), StatusCode::kUnavailable);
  env.FailSyncs(false);
  // Even though the disk recovered, the journal refuses more records.
  results = AppendAll(*journal, {"refused"});
  EXPECT_EQ(results[0].code(), StatusCode::kUnavailable);
  EXPECT_NE(results[0].message().find("broken"), std::string::npos) << results[0].ToString();
  EXPECT_FALSE(journal->Compact({"snap"}).ok());
  journal.reset();
  // Reopening recovers: "ok" is there; "lost?" is an unknown outcome (here
  // its bytes were written, so it is replayed); "refused" never is.
  Records after = Replayed(env);
  ASSERT_GE(after.size(), 1u);
  EXPECT_EQ(after[0], "ok");
  EXPECT_EQ(std::count(after.begin(), after.end(), "refused"), 0);
}

TEST(JournalTest, OversizedRecordIsRejectedAtOnce) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  Status result;
  journal->Append(std::string(Journal::kMaxRecordBytes + 1, 'x'),
                  [&result](Status s) { result = std::move(s); });
  EXPECT_EQ(result.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(journal->pending_records(), 0u);
}

TEST(JournalTest, CompactReplacesTheContents) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ExpectAllOk(AppendAll(*journal, {"a", "b", "c", "d"}));
  bool pending_done = false;
  journal->Append("e", [&pending_done](Status s) { pending_done = s.ok(); });
  ASSERT_TRUE(journal->Compact({"snapshot 1", "snapshot 2"}).ok());
  EXPECT_TRUE(pending_done) << "buffered records are synced before compacting";
  EXPECT_EQ(journal->durable_bytes(), Frame("snapshot 1").size() + Frame("snapshot 2").size());
  ExpectAllOk(AppendAll(*journal, {"after"}));
  EXPECT_EQ(env.ListFiles(), std::vector<std::string>{kPath});
  env.SimulateCrash();
  EXPECT_EQ(Replayed(env), (Records{"snapshot 1", "snapshot 2", "after"}));
}

// Runs the steps of a compaction (and one append after it) with the machine
// dying after each possible number of operations, then recovers: the journal
// must be exactly the old one or exactly the new one, never a mix or a loss.
TEST(JournalTest, CompactionIsCrashSafeAtEveryStep) {
  const Records old_records = {"old 1", "old 2", "old 3"};
  const Records snapshot = {"snap 1", "snap 2"};
  Records new_records = snapshot;
  new_records.push_back("after");

  // Count the operations of a compaction that does not crash.
  uint64_t total_ops = 0;
  {
    MemoryEnv env;
    JournalReplay replay;
    auto journal = MustOpen(env, &replay);
    ExpectAllOk(AppendAll(*journal, old_records));
    const uint64_t start = env.MutatingOps();
    ASSERT_TRUE(journal->Compact(snapshot).ok());
    ExpectAllOk(AppendAll(*journal, {"after"}));
    total_ops = env.MutatingOps() - start;
  }
  ASSERT_GE(total_ops, 6u);

  for (uint64_t keep_unsynced : {uint64_t{0}, uint64_t{5}, uint64_t{1000}}) {
    for (uint64_t crash_at = 0; crash_at <= total_ops; ++crash_at) {
      SCOPED_TRACE("crash after " + std::to_string(crash_at) + " ops, keeping " +
                   std::to_string(keep_unsynced) + " unsynced bytes");
      MemoryEnv env;
      bool compacted = false;
      bool after_acknowledged = false;
      {
        JournalReplay replay;
        auto journal = MustOpen(env, &replay);
        ExpectAllOk(AppendAll(*journal, old_records));
        env.CrashAfterOps(crash_at);
        compacted = journal->Compact(snapshot).ok();
        after_acknowledged = compacted && AppendAll(*journal, {"after"})[0].ok();
      }
      env.SimulateCrash(keep_unsynced);
      JournalReplay replay;
      auto journal = MustOpen(env, &replay);
      if (compacted) {
        // Acknowledged work must be there.
        if (after_acknowledged) {
          EXPECT_EQ(replay.records, new_records);
        } else {
          EXPECT_TRUE(replay.records == snapshot || replay.records == new_records);
        }
      } else {
        EXPECT_TRUE(replay.records == old_records || replay.records == snapshot ||
                    replay.records == new_records)
            << "got " << replay.records.size() << " records";
      }
      EXPECT_EQ(env.ListFiles(), std::vector<std::string>{kPath}) << "temporary file left";
      EXPECT_EQ(crash_at == total_ops, after_acknowledged);
    }
  }
}

TEST(JournalTest, CompactionOnAFullDiskKeepsTheOldJournalInUse) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ExpectAllOk(AppendAll(*journal, {"a", "b"}));
  env.SetFreeSpace(5);
  Status s = journal->Compact({std::string(100, 's')});
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(env.ListFiles(), std::vector<std::string>{kPath});
  env.SetFreeSpace(std::nullopt);
  ExpectAllOk(AppendAll(*journal, {"c"}));
  journal.reset();
  EXPECT_EQ(Replayed(env), (Records{"a", "b", "c"}));
}

// --- The same journal on the real file system. ---

class PosixJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/drover-journal-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string dir_;
  bool mounted_ = false;
  PosixEnv env_;
};

TEST_F(PosixJournalTest, RoundTripTornTailAndCompaction) {
  const std::string path = dir_ + "/state/journal";
  {
    JournalReplay replay;
    auto journal = MustOpen(env_, &replay, path);
    ExpectAllOk(AppendAll(*journal, {"one", "two", "three"}));
  }
  // Tear the last record by hand.
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(std::filesystem::file_size(path) - 2)), 0);
  {
    JournalReplay replay;
    auto journal = MustOpen(env_, &replay, path);
    EXPECT_EQ(replay.records, (Records{"one", "two"}));
    EXPECT_EQ(replay.discarded_bytes, Frame("three").size() - 2);
    ASSERT_TRUE(journal->Compact({"snapshot"}).ok());
    ExpectAllOk(AppendAll(*journal, {"four"}));
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".compact"));
  EXPECT_EQ(Replayed(env_, path), (Records{"snapshot", "four"}));
}

// ReadFile sizes its string from the file (a big journal is read without
// regrowing it): empty, small, bigger than one read, and a file that is
// not regular (no size to go by) all come back whole.
TEST_F(PosixJournalTest, ReadFileReturnsTheWholeFileWhateverItsSize) {
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << text;
    return dir_ + "/" + name;
  };
  EXPECT_EQ(env_.ReadFile(write("empty", "")).value(), "");
  EXPECT_EQ(env_.ReadFile(write("small", "abc")).value(), "abc");
  std::string big(300 * 1024 + 7, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  EXPECT_EQ(env_.ReadFile(write("big", big)).value(), big);
  // /proc files report a size of 0 and have content: read on past it.
  EXPECT_NE(env_.ReadFile("/proc/self/status").value().find("Name:"), std::string::npos);
  EXPECT_FALSE(env_.ReadFile(dir_ + "/missing").ok());
}

// The journal holds jobs' environment variables: the journal and the
// snapshot that replaces it are 0600, and a journal an older version left
// 0644 is narrowed when it is opened.
TEST_F(PosixJournalTest, JournalAndSnapshotAreOwnerOnly) {
  const std::string path = dir_ + "/journal";
  auto mode = [&] { return std::filesystem::status(path).permissions(); };
  using std::filesystem::perms;
  {
    JournalReplay replay;
    auto journal = MustOpen(env_, &replay, path);
    ExpectAllOk(AppendAll(*journal, {"env FOO=secret"}));
    EXPECT_EQ(mode(), perms::owner_read | perms::owner_write);
    ASSERT_TRUE(journal->Compact({"snapshot"}).ok());
    EXPECT_EQ(mode(), perms::owner_read | perms::owner_write);
  }
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  JournalReplay replay;
  auto journal = MustOpen(env_, &replay, path);
  EXPECT_EQ(mode(), perms::owner_read | perms::owner_write);
}

TEST_F(PosixJournalTest, RealFullDiskIsAStatus) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=64k") != 0) {
    GTEST_SKIP() << "cannot mount a small tmpfs here: " << std::strerror(errno);
  }
  mounted_ = true;
  const std::string path = dir_ + "/journal";
  JournalReplay replay;
  auto journal = MustOpen(env_, &replay, path);
  Records acknowledged;
  Status failure;
  for (int i = 0; i < 1000 && failure.ok(); ++i) {
    std::string record = "record " + std::to_string(i) + std::string(1000, '.');
    auto results = AppendAll(*journal, {record});
    if (results[0].ok())
      acknowledged.push_back(record);
    else
      failure = results[0];
  }
  EXPECT_EQ(failure.code(), StatusCode::kResourceExhausted) << failure.ToString();
  EXPECT_GT(acknowledged.size(), 10u);
  journal.reset();
  EXPECT_EQ(Replayed(env_, path), acknowledged);
}

// Counts the helper thread's wake-ups; a test waits for the n-th.
class Wakes {
 public:
  std::function<void()> fn() {
    return [this] {
      {
        std::lock_guard lock(mu_);
        ++count_;
      }
      cv_.notify_all();
    };
  }
  bool WaitFor(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return count_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
};

// A callback that adds `name` to `done` (or the error it got instead).
std::function<void(Status)> Into(std::vector<std::string>& done, std::string name) {
  return
      [&done, name = std::move(name)](Status s) { done.push_back(s.ok() ? name : s.ToString()); };
}

TEST(JournalTest, BackgroundSyncRunsCallbacksOnlyWhenReapedAndKeepsOrder) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ASSERT_NE(journal, nullptr);
  Wakes wakes;
  auto wake = wakes.fn();
  std::vector<std::string> done;
  journal->Append("one", Into(done, "one"));
  journal->SyncInBackground(wake);
  EXPECT_TRUE(journal->sync_in_flight());
  journal->Append("two", Into(done, "two"));
  journal->SyncInBackground(wake);  // goes out once the first batch is reaped
  EXPECT_TRUE(done.empty()) << "callbacks run on the owner's thread, at the reap";
  journal->ReapBackground();
  EXPECT_EQ(done, Records({"one"}));
  EXPECT_TRUE(journal->sync_in_flight());
  journal->ReapBackground();
  EXPECT_EQ(done, Records({"one", "two"}));
  EXPECT_FALSE(journal->sync_in_flight());
  // Each batch wakes its owner once, after it is done.
  EXPECT_TRUE(wakes.WaitFor(2));
  EXPECT_EQ(journal->durable_bytes(), Frame("one").size() + Frame("two").size());
  journal.reset();
  EXPECT_EQ(Replayed(env), Records({"one", "two"}));
}

// The owner's reap on a wake-up (ReapIfDone) never waits for the helper
// thread: a wake-up that meets a batch still being written (its own was
// reaped by another path) leaves it to that batch's own wake-up.
TEST(JournalTest, AReapOnAWakeUpLeavesABatchNotDoneWithoutWaiting) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ASSERT_NE(journal, nullptr);
  Wakes wakes;
  std::vector<std::string> done;
  journal->Append("one", Into(done, "one"));
  journal->SyncInBackground(wakes.fn());
  ASSERT_TRUE(wakes.WaitFor(1));
  EXPECT_TRUE(journal->ReapIfDone());
  EXPECT_EQ(done, Records({"one"}));

  env.HoldSyncs(true);  // the next batch's fsync does not end until released
  journal->Append("two", Into(done, "two"));
  journal->SyncInBackground(wakes.fn());
  EXPECT_FALSE(journal->ReapIfDone()) << "reaped a batch still being written";
  EXPECT_TRUE(journal->sync_in_flight());
  EXPECT_EQ(done, Records({"one"}));

  env.HoldSyncs(false);
  ASSERT_TRUE(wakes.WaitFor(2));
  EXPECT_TRUE(journal->ReapIfDone());
  EXPECT_EQ(done, Records({"one", "two"}));
  EXPECT_FALSE(journal->ReapIfDone()) << "nothing is in flight";
  journal.reset();
  EXPECT_EQ(Replayed(env), Records({"one", "two"}));
}

TEST(JournalTest, BackgroundSyncFailureBreaksTheJournalAsSyncDoes) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ASSERT_NE(journal, nullptr);
  env.FailSyncs(true);
  Status outcome = Internal("callback never ran");
  journal->Append("lost", [&](Status s) { outcome = std::move(s); });
  journal->SyncInBackground([] {});
  journal->ReapBackground();
  EXPECT_FALSE(outcome.ok());
  EXPECT_FALSE(journal->broken().ok());
  Status later = Internal("callback never ran");
  journal->Append("later", [&](Status s) { later = std::move(s); });
  EXPECT_FALSE(later.ok()) << "a broken journal refuses appends";
}

TEST(JournalTest, SyncWaitsForABatchInFlight) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ASSERT_NE(journal, nullptr);
  int callbacks = 0;
  journal->Append("first", [&](Status s) { callbacks += s.ok(); });
  journal->SyncInBackground([] {});
  journal->Append("second", [&](Status s) { callbacks += s.ok(); });
  ASSERT_TRUE(journal->Sync().ok());
  EXPECT_EQ(callbacks, 2);
  EXPECT_FALSE(journal->sync_in_flight());
  journal.reset();
  EXPECT_EQ(Replayed(env), Records({"first", "second"}));
}

// A compaction on the helper thread: buffered records go to the old journal
// first, `done` runs at the reap, and records appended while it is in
// flight follow the snapshot in the new journal.
TEST(JournalTest, BackgroundCompactionKeepsWhatIsAppendedMeanwhile) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ASSERT_NE(journal, nullptr);
  ExpectAllOk(AppendAll(*journal, {"a", "b"}));
  bool buffered_done = false;
  journal->Append("c", [&](Status s) { buffered_done = s.ok(); });
  Wakes wakes;
  auto wake = wakes.fn();
  Status compacted = Internal("callback never ran");
  journal->CompactInBackground({"snap 1", "snap 2"}, wake,
                               [&](Status s) { compacted = std::move(s); });
  EXPECT_TRUE(buffered_done) << "buffered records are synced before compacting";
  EXPECT_TRUE(journal->sync_in_flight());
  std::vector<std::string> done;
  journal->Append("meanwhile",
                  [&](Status s) { done.push_back(s.ok() ? "meanwhile" : s.ToString()); });
  journal->SyncInBackground(wake);  // waits for the compaction
  EXPECT_EQ(compacted.code(), StatusCode::kInternal) << "done runs at the reap";
  journal->ReapBackground();
  EXPECT_TRUE(compacted.ok()) << compacted.ToString();
  EXPECT_TRUE(done.empty());
  journal->ReapBackground();  // the batch that waited
  EXPECT_EQ(done, Records({"meanwhile"}));
  // The helper marks a batch done before it wakes the owner: the second
  // wake-up may come just after the reap.
  EXPECT_TRUE(wakes.WaitFor(2));
  EXPECT_EQ(journal->durable_bytes(),
            Frame("snap 1").size() + Frame("snap 2").size() + Frame("meanwhile").size());
  EXPECT_EQ(env.ListFiles(), std::vector<std::string>{kPath});
  env.SimulateCrash();
  EXPECT_EQ(Replayed(env), (Records{"snap 1", "snap 2", "meanwhile"}));
}

// A prefix given with the snapshot is framed into the first `prefixed`
// records as if each began with it, checksum included; a record that the
// prefix takes over the limit is refused before any work starts.
TEST(JournalTest, BackgroundCompactionFramesAPrefixIntoTheFirstRecords) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ASSERT_NE(journal, nullptr);
  ExpectAllOk(AppendAll(*journal, {"a"}));
  Status compacted = Internal("callback never ran");
  journal->CompactInBackground(
      {"one", "two", "lease"}, "R", 2, [] {}, [&](Status s) { compacted = std::move(s); });
  journal->ReapBackground();
  ASSERT_TRUE(compacted.ok()) << compacted.ToString();
  EXPECT_EQ(journal->durable_bytes(),
            Frame("Rone").size() + Frame("Rtwo").size() + Frame("lease").size());
  Status over = Status::Ok();
  journal->CompactInBackground(
      {std::string(Journal::kMaxRecordBytes, 'x')}, "R", 1, [] {},
      [&](Status s) { over = std::move(s); });
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument) << over.ToString();
  env.SimulateCrash();
  EXPECT_EQ(Replayed(env), (Records{"Rone", "Rtwo", "lease"}));
}

// A background compaction that fails (a full disk) leaves the old journal
// in use and whole, as Compact does, and says so through `done`.
TEST(JournalTest, BackgroundCompactionOnAFullDiskKeepsTheOldJournal) {
  MemoryEnv env;
  JournalReplay replay;
  auto journal = MustOpen(env, &replay);
  ASSERT_NE(journal, nullptr);
  ExpectAllOk(AppendAll(*journal, {"a", "b"}));
  env.SetFreeSpace(5);
  Status compacted = Status::Ok();
  journal->CompactInBackground(
      {std::string(100, 's')}, [] {}, [&](Status s) { compacted = std::move(s); });
  journal->ReapBackground();
  EXPECT_EQ(compacted.code(), StatusCode::kResourceExhausted) << compacted.ToString();
  EXPECT_TRUE(journal->broken().ok());
  env.SetFreeSpace(std::nullopt);
  ExpectAllOk(AppendAll(*journal, {"c"}));
  EXPECT_EQ(env.ListFiles(), std::vector<std::string>{kPath});
  journal.reset();
  EXPECT_EQ(Replayed(env), (Records{"a", "b", "c"}));
}

}  // namespace
}  // namespace drover::store
