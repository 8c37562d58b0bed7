#include "server/lease_book.h"

#include <gtest/gtest.h>

namespace drover::server {
namespace {

using core::LeaseKind;

TEST(LeaseBookTest, OwnerRoundTrips) {
  LeaseBook book("abc");
  const AttemptRef a{TaskId{12, 4}, 3};
  EXPECT_EQ(book.OwnerOf(a), "task:12.4#3@abc");
  EXPECT_EQ(LeaseBook::ParseOwner(book.OwnerOf(a)), a);
  EXPECT_EQ(LeaseBook::ParseOwner("worker:3"), std::nullopt);
  EXPECT_EQ(LeaseBook::ParseOwner("task:12.4@abc"), std::nullopt);
  EXPECT_EQ(LeaseBook::ParseOwner("task:12.4#x@abc"), std::nullopt);
  EXPECT_EQ(LeaseBook::ParseOwner("task:12#1@abc"), std::nullopt);
}

TEST(LeaseBookTest, SlotKeysNameTheirTask) {
  EXPECT_EQ(LeaseBook::TaskOfSlotKey("lease:3:slot:12.4"), (TaskId{12, 4}));
  EXPECT_EQ(LeaseBook::TaskOfSlotKey("lease:3:gpu:1"), std::nullopt);
  EXPECT_EQ(LeaseBook::TaskOfSlotKey("lease:3:gpu:1:share:12.4"), std::nullopt);
  EXPECT_EQ(LeaseBook::TaskOfSlotKey("worker:3:hb"), std::nullopt);
}

TEST(LeaseBookTest, FreedSlotKeyGivesTheHoldingAttemptOnce) {
  LeaseBook book("s");
  book.Granted({TaskId{1, 0}, 2}, "lease:1:slot:1.0");
  EXPECT_EQ(book.Freed("lease:1:gpu:0"), std::nullopt);
  EXPECT_EQ(book.Freed("lease:1:slot:1.0"), (AttemptRef{TaskId{1, 0}, 2}));
  EXPECT_EQ(book.Freed("lease:1:slot:1.0"), std::nullopt);
  EXPECT_EQ(book.size(), 0u);
}

// Attempt 1 ran on worker 1; it was withdrawn and attempt 2 granted on
// worker 2. The store's event for worker 1's key, which can come after that
// grant (Redis notifies on another connection), is not attempt 2's: before,
// the book answered with the task's current attempt, and the server killed
// a live attempt for "lease expired".
TEST(LeaseBookTest, AnEarlierAttemptsKeyFreedLateIsNotTheCurrentAttempts) {
  LeaseBook book("s");
  book.Granted({TaskId{6, 2}, 1}, "lease:1:slot:6.2");
  book.Granted({TaskId{6, 2}, 2}, "lease:2:slot:6.2");
  EXPECT_EQ(book.Freed("lease:1:slot:6.2"), std::nullopt);
  EXPECT_EQ(book.size(), 1u);
  EXPECT_EQ(book.Freed("lease:2:slot:6.2"), (AttemptRef{TaskId{6, 2}, 2}));
}

TEST(LeaseBookTest, RenewIsSplitPerOwnerAndSkipsUnknownTasks) {
  LeaseBook book("s");
  book.Granted({TaskId{1, 0}, 1}, "lease:7:slot:1.0");
  book.Granted({TaskId{1, 2}, 4}, "lease:7:slot:1.2");
  const std::vector<core::LeaseKey> keys = {
      {LeaseKind::kSlot, 7, 0, TaskId{1, 0}},
      {LeaseKind::kGpu, 7, 1, TaskId{}},
      {LeaseKind::kSlot, 7, 0, TaskId{1, 1}},  // not ours: skipped with its GPU
      {LeaseKind::kGpu, 7, 2, TaskId{}},
      {LeaseKind::kSlot, 7, 0, TaskId{1, 2}},
      {LeaseKind::kGpuShare, 7, 3, TaskId{1, 2}},
  };
  std::vector<LeaseBook::RenewBatch> batches = book.SplitRenew(keys);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].owner, "task:1.0#1@s");
  EXPECT_EQ(batches[0].keys, (std::vector<std::string>{"lease:7:slot:1.0", "lease:7:gpu:1"}));
  EXPECT_EQ(batches[1].owner, "task:1.2#4@s");
  EXPECT_EQ(batches[1].keys,
            (std::vector<std::string>{"lease:7:slot:1.2", "lease:7:gpu:3:share:1.2"}));
}

}  // namespace
}  // namespace drover::server
