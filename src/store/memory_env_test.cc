#include "store/memory_env.h"

#include <gtest/gtest.h>

namespace drover::store {
namespace {

// The journal's crash tests are only as good as this model of a disk, so
// check the model itself against env.h's durability rules.

TEST(MemoryEnvTest, UnsyncedBytesAndUnsyncedNamesDoNotSurviveACrash) {
  MemoryEnv env;
  auto named = env.OpenAppendable("/d/named");
  ASSERT_TRUE(named.ok());
  ASSERT_TRUE(env.SyncDir("/d").ok());
  ASSERT_TRUE((*named)->Append("synced").ok());
  ASSERT_TRUE((*named)->Sync().ok());
  ASSERT_TRUE((*named)->Append(" unsynced").ok());

  auto unnamed = env.OpenAppendable("/d/unnamed");  // its name is never synced
  ASSERT_TRUE(unnamed.ok());
  ASSERT_TRUE((*unnamed)->Append("data").ok());
  ASSERT_TRUE((*unnamed)->Sync().ok());

  env.SimulateCrash();
  EXPECT_EQ(env.ReadFile("/d/named").value(), "synced");
  EXPECT_FALSE(env.Exists("/d/unnamed"));
  EXPECT_EQ((*named)->Append("x").code(), StatusCode::kUnavailable) << "stale handle";
}

TEST(MemoryEnvTest, RenameIsDurableOnlyAfterSyncDir) {
  MemoryEnv env;
  env.SetFile("/d/old", "old");
  env.SetFile("/d/new", "new");
  ASSERT_TRUE(env.Rename("/d/new", "/d/old").ok());
  EXPECT_EQ(env.ReadFile("/d/old").value(), "new");
  env.SimulateCrash();
  EXPECT_EQ(env.ReadFile("/d/old").value(), "old");

  ASSERT_TRUE(env.Rename("/d/new", "/d/old").ok());
  ASSERT_TRUE(env.SyncDir("/d").ok());
  env.SimulateCrash();
  EXPECT_EQ(env.ReadFile("/d/old").value(), "new");
  EXPECT_FALSE(env.Exists("/d/new"));
}

TEST(MemoryEnvTest, FaultsAreStatuses) {
  MemoryEnv env;
  auto file = env.OpenAppendable("/f");
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(env.SyncDir("/").ok());
  env.SetFreeSpace(3);
  EXPECT_EQ((*file)->Append("abcdef").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ((*file)->Size(), 3u) << "a full disk writes what fits";
  ASSERT_TRUE((*file)->Truncate(0).ok());
  EXPECT_TRUE((*file)->Append("xyz").ok()) << "truncating gives the space back";

  env.FailSyncs(true);
  EXPECT_EQ((*file)->Sync().code(), StatusCode::kUnavailable);
  env.FailSyncs(false);

  env.CrashAfterOps(1);
  EXPECT_TRUE((*file)->Sync().ok());
  EXPECT_EQ((*file)->Append("a").code(), StatusCode::kUnavailable);
  EXPECT_EQ(env.Rename("/f", "/g").code(), StatusCode::kUnavailable);
  env.SimulateCrash();
  auto contents = env.ReadFile("/f");
  ASSERT_TRUE(contents.ok()) << contents.status().ToString();
  EXPECT_EQ(*contents, "xyz");
}

}  // namespace
}  // namespace drover::store
