#include "server/worker_registry.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "net/private_file.h"

namespace drover::server {
namespace {

class WorkerRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "drover-reg-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    path_ = dir_ + "/workers.json";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, path_;
};

std::string Key(char c) { return std::string(64, c); }

TEST_F(WorkerRegistryTest, IdsAreStableAcrossReopen) {
  {
    auto reg = WorkerRegistry::Open(path_);
    ASSERT_TRUE(reg.ok()) << reg.status().ToString();
    EXPECT_EQ((*reg)->Admit("a", Key('a')).value(), 1u);
    EXPECT_EQ((*reg)->Admit("b", Key('b')).value(), 2u);
    EXPECT_EQ((*reg)->Admit("a", Key('a')).value(), 1u);
  }
  auto reg = WorkerRegistry::Open(path_);
  ASSERT_TRUE(reg.ok());
  EXPECT_EQ((*reg)->Find("b"), 2u);
  EXPECT_EQ((*reg)->NameOf(1), "a");
  EXPECT_EQ((*reg)->Admit("c", Key('c')).value(), 3u);
}

TEST_F(WorkerRegistryTest, RejectsAFileThatIsNotAMap) {
  ASSERT_TRUE(net::WritePrivateFile(path_, "{\"workers\": 3}").ok());
  auto reg = WorkerRegistry::Open(path_);
  ASSERT_FALSE(reg.ok());
  EXPECT_EQ(reg.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(reg.status().message().find(path_), std::string::npos);
}

TEST_F(WorkerRegistryTest, AnUnwritableFileGivesNoId) {
  auto reg = WorkerRegistry::Open(dir_ + "/missing/dir/that/is/a/file");
  ASSERT_TRUE(reg.ok());
  // Make the parent a regular file so the write must fail.
  ASSERT_TRUE(net::WritePrivateFile(dir_ + "/missing", "x").ok());
  Result<WorkerId> id = (*reg)->Admit("a", Key('a'));
  EXPECT_FALSE(id.ok());
  EXPECT_EQ((*reg)->Find("a"), std::nullopt);
}

TEST_F(WorkerRegistryTest, TheActiveSetSurvivesReopenAndOldFilesCountEveryone) {
  {
    auto reg = WorkerRegistry::Open(path_);
    ASSERT_TRUE(reg.ok());
    EXPECT_TRUE((*reg)->Active().empty());
    ASSERT_TRUE((*reg)->Admit("a", Key('a')).ok());
    ASSERT_TRUE((*reg)->Admit("b", Key('b')).ok());
    ASSERT_TRUE((*reg)->Admit("retired", Key('r')).ok());
    EXPECT_EQ((*reg)->Active(), (std::vector<WorkerId>{1, 2, 3}));
    ASSERT_TRUE((*reg)->MarkInactive(2).ok());
    ASSERT_TRUE((*reg)->MarkInactive(3).ok());
    ASSERT_TRUE((*reg)->MarkInactive(3).ok());
  }
  auto reg = WorkerRegistry::Open(path_);
  ASSERT_TRUE(reg.ok());
  EXPECT_EQ((*reg)->Active(), std::vector<WorkerId>{1});

  // A file written before "active" existed: every worker may hold work.
  ASSERT_TRUE(
      net::WritePrivateFile(path_, R"({"next_id": 3, "workers": {"a": 1, "b": 2}})").ok());
  reg = WorkerRegistry::Open(path_);
  ASSERT_TRUE(reg.ok());
  EXPECT_EQ((*reg)->Active(), (std::vector<WorkerId>{1, 2}));

  ASSERT_TRUE(net::WritePrivateFile(
                  path_, R"({"next_id": 3, "workers": {"a": 1}, "active": [1, 7]})")
                  .ok());
  reg = WorkerRegistry::Open(path_);
  ASSERT_FALSE(reg.ok());
  EXPECT_NE(reg.status().message().find("bad id 7 in \"active\""), std::string::npos)
      << reg.status().message();
}

TEST_F(WorkerRegistryTest, ANameBelongsToTheFirstKeyAndOnlyItsHashIsStored) {
  const std::string key = Key('a');
  {
    auto reg = WorkerRegistry::Open(path_);
    ASSERT_TRUE(reg.ok());
    EXPECT_TRUE((*reg)->Admit("a", key).ok());
    EXPECT_TRUE((*reg)->Admit("a", key).ok());
    Status other = (*reg)->Admit("a", Key('b')).status();
    EXPECT_EQ(other.code(), StatusCode::kPermissionDenied);
    EXPECT_NE(other.message().find("worker name \"a\" belongs to another worker"),
              std::string::npos);
    EXPECT_EQ((*reg)->Admit("b", "short").status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ((*reg)->Admit("b", "").status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ((*reg)->Find("b"), std::nullopt) << "a refused hello records nothing";
  }
  Result<std::string> text = net::ReadWholeFile(path_);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->find(key), std::string::npos) << "the key itself must not be stored";
  auto reg = WorkerRegistry::Open(path_);
  ASSERT_TRUE(reg.ok());
  EXPECT_TRUE((*reg)->Admit("a", key).ok());
  EXPECT_EQ((*reg)->Admit("a", Key('c')).status().code(), StatusCode::kPermissionDenied);
}

// A hello's key, id and active mark go in one write: a pool's first attach
// costs one fsync per worker, not three; a known active worker costs none.
TEST_F(WorkerRegistryTest, AdmitRecordsANewWorkerInOneWriteAndAKnownOneInNone) {
  const std::string key(64, 'k');
  {
    auto reg = WorkerRegistry::Open(path_);
    ASSERT_TRUE(reg.ok());
    EXPECT_EQ((*reg)->Admit("a", key).value(), 1u);
    EXPECT_EQ((*reg)->writes(), 1u);
    EXPECT_EQ((*reg)->Admit("a", key).value(), 1u);
    EXPECT_EQ((*reg)->Admit("b", std::string(64, 'l')).value(), 2u);
    EXPECT_EQ((*reg)->writes(), 2u);
    EXPECT_EQ((*reg)->Admit("a", std::string(64, 'x')).status().code(),
              StatusCode::kPermissionDenied);
    EXPECT_EQ((*reg)->Admit("c", "short").status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ((*reg)->writes(), 2u);
    ASSERT_TRUE((*reg)->MarkInactive(1).ok());
  }
  auto reg = WorkerRegistry::Open(path_);
  ASSERT_TRUE(reg.ok());
  EXPECT_EQ((*reg)->Active(), std::vector<WorkerId>{2});
  // Known and active: nothing to write. Known, inactive: one write.
  EXPECT_EQ((*reg)->Admit("b", std::string(64, 'l')).value(), 2u);
  EXPECT_EQ((*reg)->writes(), 0u);
  EXPECT_EQ((*reg)->Admit("a", key).value(), 1u);
  EXPECT_EQ((*reg)->writes(), 1u);
  EXPECT_EQ((*reg)->Active(), (std::vector<WorkerId>{1, 2}));
}

TEST_F(WorkerRegistryTest, AnAdmitThatCannotBeWrittenChangesNothing) {
  auto reg = WorkerRegistry::Open(dir_ + "/missing/workers.json");
  ASSERT_TRUE(reg.ok());
  ASSERT_TRUE(net::WritePrivateFile(dir_ + "/missing", "x").ok());
  EXPECT_FALSE((*reg)->Admit("a", std::string(64, 'k')).ok());
  EXPECT_EQ((*reg)->Find("a"), std::nullopt);
  EXPECT_TRUE((*reg)->Active().empty());
  // The name was not claimed: another key may still take it.
  std::filesystem::remove(dir_ + "/missing");
  std::filesystem::create_directory(dir_ + "/missing");
  EXPECT_EQ((*reg)->Admit("a", std::string(64, 'z')).value(), 1u);
}

TEST_F(WorkerRegistryTest, StagedChangesAreSeenAtOnceAndWrittenTogether) {
  {
    auto reg = WorkerRegistry::Open(path_);
    ASSERT_TRUE(reg.ok());
    EXPECT_FALSE((*reg)->staged());
    EXPECT_EQ((*reg)->Stage("a", Key('a')).value(), 1u);
    EXPECT_EQ((*reg)->Stage("b", Key('b')).value(), 2u);
    // The same hello again, and another key for a staged name.
    EXPECT_EQ((*reg)->Stage("a", Key('a')).value(), 1u);
    EXPECT_EQ((*reg)->Stage("a", Key('x')).status().code(), StatusCode::kPermissionDenied);
    EXPECT_TRUE((*reg)->staged());
    EXPECT_EQ((*reg)->writes(), 0u);
    EXPECT_EQ((*reg)->Find("b"), 2u);
    EXPECT_EQ((*reg)->Active(), (std::vector<WorkerId>{1, 2}));
    ASSERT_TRUE((*reg)->Commit().ok());
    EXPECT_FALSE((*reg)->staged());
    EXPECT_EQ((*reg)->writes(), 1u);
    // Nothing staged: nothing written.
    ASSERT_TRUE((*reg)->Commit().ok());
    EXPECT_EQ((*reg)->writes(), 1u);
    (*reg)->StageInactive(1);
    (*reg)->StageInactive(1);
    EXPECT_EQ((*reg)->Stage("c", Key('c')).value(), 3u);
    ASSERT_TRUE((*reg)->Commit().ok());
    EXPECT_EQ((*reg)->writes(), 2u);
  }
  auto reg = WorkerRegistry::Open(path_);
  ASSERT_TRUE(reg.ok());
  EXPECT_EQ((*reg)->Ids(), (std::vector<WorkerId>{1, 2, 3}));
  EXPECT_EQ((*reg)->Active(), (std::vector<WorkerId>{2, 3}));
}

TEST_F(WorkerRegistryTest, ACommitThatCannotBeWrittenUndoesEveryStagedChange) {
  auto reg = WorkerRegistry::Open(dir_ + "/missing/workers.json");
  ASSERT_TRUE(reg.ok());
  std::filesystem::create_directory(dir_ + "/missing");
  ASSERT_TRUE((*reg)->Admit("a", Key('a')).ok());
  std::filesystem::remove_all(dir_ + "/missing");
  ASSERT_TRUE(net::WritePrivateFile(dir_ + "/missing", "x").ok());
  EXPECT_EQ((*reg)->Stage("b", Key('b')).value(), 2u);
  (*reg)->StageInactive(1);
  EXPECT_FALSE((*reg)->Commit().ok());
  EXPECT_FALSE((*reg)->staged());
  EXPECT_EQ((*reg)->Find("b"), std::nullopt);
  EXPECT_EQ((*reg)->Active(), std::vector<WorkerId>{1});
  // The id was not used up, nor the name claimed.
  std::filesystem::remove(dir_ + "/missing");
  std::filesystem::create_directory(dir_ + "/missing");
  EXPECT_EQ((*reg)->Admit("b", Key('y')).value(), 2u);
}

}  // namespace
}  // namespace drover::server
