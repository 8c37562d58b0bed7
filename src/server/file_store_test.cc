// FileStore: commits checked against the hash, references per task, and
// deletion when the last reference goes (superseded, job forgotten), never
// while the journal is replayed.

#include "server/file_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "net/sha256.h"

namespace drover::server {
namespace {

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "drover-fs-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    Result<std::unique_ptr<FileStore>> opened = FileStore::Open(root_ + "/files");
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // An upload of `bytes` as net::Server hands it over; commits it.
  std::string Put(const std::string& bytes) {
    net::Upload up;
    up.path = store_->dir() + "/.upload-" + std::to_string(next_++);
    std::ofstream(up.path, std::ios::binary) << bytes;
    up.size = bytes.size();
    net::Sha256 sha;
    sha.Update(bytes);
    up.sha256 = sha.HexDigest();
    EXPECT_TRUE(store_->Commit(up, up.sha256).ok());
    ::unlink(up.path.c_str());
    return up.sha256;
  }

  std::string root_;
  std::unique_ptr<FileStore> store_;
  int next_ = 0;
};

TEST_F(FileStoreTest, CommitChecksTheHashAndLeavesNothingOnMismatch) {
  net::Upload up{store_->dir() + "/.upload-x", 3, std::string(64, 'a')};
  std::ofstream(up.path) << "abc";
  Status s = store_->Commit(up, std::string(64, 'b'));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(store_->Has(std::string(64, 'b')));
  const std::string sha = Put("hello");
  Result<std::pair<std::string, uint64_t>> found = store_->Find(sha);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->second, 5u);
  EXPECT_TRUE(std::filesystem::exists(found->first));
}

TEST_F(FileStoreTest, SupersededAndForgottenBlobsAreDeleted) {
  const std::string a = Put("step 1");
  const std::string b = Put("step 2");
  const std::string shared = Put("same in both tasks");
  store_->SetTaskFiles(TaskId{1, 0}, {a, shared});
  store_->SetTaskFiles(TaskId{1, 1}, {shared});
  EXPECT_EQ(store_->references(shared), 2u);
  store_->SetTaskFiles(TaskId{1, 0}, {b, shared});
  EXPECT_FALSE(store_->Has(a));
  EXPECT_TRUE(store_->Has(b));
  EXPECT_TRUE(store_->Has(shared));
  store_->ForgetJob(1);
  EXPECT_FALSE(store_->Has(b));
  EXPECT_FALSE(store_->Has(shared));
  EXPECT_EQ(store_->stats().blobs, 0u);
}

TEST_F(FileStoreTest, HoldersAreKeptPerBlobAndGoWithIt) {
  const std::string a = Put("ana's");
  const std::string absent(64, 'c');
  store_->AddHolder(a, "ana");
  store_->AddHolder(a, "ana");
  store_->AddHolder(absent, "ana");  // no blob: nothing to hold
  EXPECT_TRUE(store_->HeldBy(a, "ana"));
  EXPECT_FALSE(store_->HeldBy(a, "bob"));
  EXPECT_FALSE(store_->HeldBy(absent, "ana"));
  store_->AddHolder(a, "bob");
  EXPECT_TRUE(store_->HeldBy(a, "bob"));
  // Deleted with its last reference: held by no one, also once the same
  // bytes come back.
  store_->SetTaskFiles(TaskId{1, 0}, {a});
  store_->ForgetJob(1);
  ASSERT_FALSE(store_->Has(a));
  EXPECT_EQ(Put("ana's"), a);
  EXPECT_FALSE(store_->HeldBy(a, "ana"));
  EXPECT_FALSE(store_->HeldBy(a, "bob"));
}

TEST_F(FileStoreTest, ReplayDeletesNothingAndSweepTakesTheUnreferenced) {
  const std::string a = Put("a");
  const std::string b = Put("b");
  store_->SetReplaying(true);
  store_->SetTaskFiles(TaskId{2, 0}, {a});
  store_->SetTaskFiles(TaskId{2, 0}, {b});  // a superseded...
  store_->SetTaskFiles(TaskId{3, 0}, {a});  // ...and named again later
  store_->SetReplaying(false);
  EXPECT_TRUE(store_->Has(a));
  const std::string orphan = Put("uploaded, never named");
  EXPECT_EQ(store_->Sweep(TimeFromMicros(0)), 0u);  // nothing that old
  EXPECT_EQ(store_->Sweep(RealClock().Now() + Seconds(60)), 1u);
  EXPECT_FALSE(store_->Has(orphan));
  EXPECT_TRUE(store_->Has(a));
  EXPECT_TRUE(store_->Has(b));
}

TEST_F(FileStoreTest, OpenIndexesBlobsAndRemovesLeftoverUploads) {
  const std::string a = Put("kept");
  std::ofstream(store_->dir() + "/.upload-left") << "partial";
  Result<std::unique_ptr<FileStore>> again = FileStore::Open(store_->dir());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)->Has(a));
  EXPECT_FALSE(std::filesystem::exists(store_->dir() + "/.upload-left"));
}

}  // namespace
}  // namespace drover::server
