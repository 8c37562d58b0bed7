#include "server/access.h"

#include <gtest/gtest.h>

namespace drover::server {
namespace {

using net::Identity;
using net::Role;

net::Request As(const Identity& who, std::string method, std::string path) {
  net::Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.identity = std::make_shared<const Identity>(who);
  return r;
}

// Job 1 is ana's, 2 bob's, 3 cy's; cy and ana are in group "lab", which
// shares its contents when `share` (bob is in "solo", which does not).
Access Make(bool hide, bool share = false) {
  AccessOptions o;
  o.hide_others = hide;
  o.owner_of = [](JobId job) -> std::optional<std::string> {
    if (job == 1) return "ana";
    if (job == 2) return "bob";
    if (job == 3) return "cy";
    return std::nullopt;
  };
  core::UserPolicy policy;
  policy.groups["lab"] = {"ana", "cy"};
  policy.groups["solo"] = {"bob"};
  if (share) policy.sharing_groups = {"lab"};
  o.shares_contents = [policy](const std::string& reader, const std::string& owner) {
    return SharesContents(policy, reader, owner);
  };
  return Access(o);
}

const Identity kAna{"ana", Role::kUser};
const Identity kVera{"vera", Role::kViewer};
const Identity kWorker{"w1", Role::kWorker};
const Identity kAdmin{"root", Role::kAdmin};

TEST(AccessTest, AUserChangesOnlyTheirOwnJobs) {
  Access a = Make(false);
  EXPECT_FALSE(a.Authorize(As(kAna, "POST", "/api/v1/jobs/1/cancel")));
  EXPECT_FALSE(a.Authorize(As(kAna, "POST", "/api/v1/tasks/1.0/cancel")));
  auto refused = a.Authorize(As(kAna, "POST", "/api/v1/jobs/2/cancel"));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403);
  EXPECT_NE(refused->body.find("ana may not cancel job 2 of bob: a user may cancel, retry and "
                               "change only their own jobs"),
            std::string::npos)
      << refused->body;
  EXPECT_TRUE(a.Authorize(As(kAna, "POST", "/api/v1/tasks/2.3/cancel")));
  EXPECT_TRUE(a.Authorize(As(kAna, "POST", "/api/v1/jobs/2/retry")));
  // Reading others' jobs is allowed unless hidden.
  EXPECT_FALSE(a.Authorize(As(kAna, "GET", "/api/v1/jobs/2")));
  EXPECT_FALSE(a.Authorize(As(kAna, "GET", "/api/v1/tasks/2.0")));
  // An unknown job: the handler's 404.
  EXPECT_FALSE(a.Authorize(As(kAna, "POST", "/api/v1/jobs/9/cancel")));
  EXPECT_FALSE(a.Authorize(As(kAdmin, "POST", "/api/v1/jobs/2/cancel")));
}

TEST(AccessTest, HiddenJobsAreRefusedToOtherUsersButNotToViewersOrAdmins) {
  Access a = Make(true);
  auto refused = a.Authorize(As(kAna, "GET", "/api/v1/tasks/2.0/logs"));
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->body.find(
                "ana may not read the logs of task 2.0 of bob: the server hides other users' jobs"),
            std::string::npos)
      << refused->body;
  EXPECT_TRUE(a.Authorize(As(kAna, "GET", "/api/v1/jobs/2")));
  EXPECT_FALSE(a.Authorize(As(kAna, "GET", "/api/v1/jobs/1")));
  EXPECT_FALSE(a.Authorize(As(kVera, "GET", "/api/v1/jobs/2")));
  EXPECT_TRUE(a.MaySee(kVera, "bob"));
  EXPECT_FALSE(a.MaySee(kAna, "bob"));
  EXPECT_TRUE(a.MaySee(kAna, "ana"));
}

// A job's contents (logs, result, outputs) are its user's, their sharing
// group's, the admins' and the viewers'; the queue is everyone's.
TEST(AccessTest, AJobsContentsAreForItsUserAdminsAndViewers) {
  Access a = Make(false);
  for (const char* route : {"/api/v1/tasks/2.0/logs", "/api/v1/tasks/2.0/logs/follow",
                            "/api/v1/tasks/2.0/outputs"}) {
    auto refused = a.Authorize(As(kAna, "GET", route));
    ASSERT_TRUE(refused) << route;
    EXPECT_EQ(refused->status, 403);
    EXPECT_FALSE(a.Authorize(As(kVera, "GET", route))) << route;
    EXPECT_FALSE(a.Authorize(As(kAdmin, "GET", route))) << route;
    EXPECT_FALSE(a.Authorize(As(Identity{"bob", Role::kUser}, "GET", route))) << route;
  }
  auto refused = a.Authorize(As(kAna, "GET", "/api/v1/tasks/2.0/outputs"));
  EXPECT_NE(refused->body.find("ana may not read the outputs of task 2.0 of bob: a job's logs, "
                               "results and files are for its user, admins and viewers"),
            std::string::npos)
      << refused->body;
  EXPECT_FALSE(a.Authorize(As(kAna, "GET", "/api/v1/tasks/1.0/logs")));
  EXPECT_TRUE(a.MayReadContents(kAna, "ana"));
  EXPECT_FALSE(a.MayReadContents(kAna, "bob"));
  EXPECT_FALSE(a.MayReadContents(kAna, "cy")) << "lab does not share";
  EXPECT_FALSE(a.MayReadContents(kAna, "")) << "a job without a user is no user's";
  EXPECT_TRUE(a.MayReadContents(kVera, "bob"));
  EXPECT_TRUE(a.MayReadContents(kAdmin, "bob"));
  EXPECT_FALSE(a.MayReadContentsOfJob(kAna, 2));
  EXPECT_FALSE(a.MayReadContentsOfJob(kAna, 9)) << "an unknown job";
  EXPECT_TRUE(a.MayReadContentsOfJob(kVera, 9));
  EXPECT_FALSE(a.ContentsReader(kAdmin)) << "admins read every file";
  EXPECT_FALSE(a.ContentsReader(kWorker));
  ASSERT_TRUE(a.ContentsReader(kAna));
  EXPECT_TRUE(a.ContentsReader(kAna)("ana"));
  EXPECT_FALSE(a.ContentsReader(kAna)("bob"));
  EXPECT_TRUE(a.Authorize(As(kAna, "GET", "/api/v1/tasks/3.0/logs")));
}

TEST(AccessTest, AGroupThatSharesItsContentsReadsItsMembersJobs) {
  for (bool hide : {false, true}) {
    Access a = Make(hide, /*share=*/true);
    EXPECT_FALSE(a.Authorize(As(kAna, "GET", "/api/v1/tasks/3.0/logs"))) << hide;
    EXPECT_FALSE(a.Authorize(As(kAna, "GET", "/api/v1/tasks/3.0/outputs"))) << hide;
    EXPECT_FALSE(a.Authorize(As(kAna, "GET", "/api/v1/jobs/3"))) << hide;
    EXPECT_TRUE(a.MaySee(kAna, "cy")) << hide;
    EXPECT_TRUE(a.MayReadContents(kAna, "cy"));
    EXPECT_TRUE(a.ContentsReader(kAna)("cy"));
    // ...but not outside the group, nor to change anything.
    EXPECT_TRUE(a.Authorize(As(kAna, "GET", "/api/v1/tasks/2.0/logs"))) << hide;
    EXPECT_TRUE(a.Authorize(As(kAna, "POST", "/api/v1/jobs/3/cancel"))) << hide;
    EXPECT_FALSE(a.MayReadContents(Identity{"bob", Role::kUser}, "ana"));
  }
  core::UserPolicy policy;
  policy.groups["lab"] = {"ana", "cy"};
  EXPECT_FALSE(SharesContents(policy, "ana", "cy"));
  policy.sharing_groups = {"lab"};
  EXPECT_TRUE(SharesContents(policy, "ana", "cy"));
  EXPECT_FALSE(SharesContents(policy, "ana", "bob"));
  policy.sharing_groups = {"nosuchgroup"};
  EXPECT_FALSE(SharesContents(policy, "ana", "cy"));
}

TEST(AccessTest, RolesMeetTheirRoutes) {
  Access a = Make(false);
  // A viewer reads, never writes.
  EXPECT_FALSE(a.Authorize(As(kVera, "GET", "/api/v1/jobs")));
  auto refused = a.Authorize(As(kVera, "POST", "/api/v1/jobs"));
  ASSERT_TRUE(refused);
  EXPECT_NE(
      refused->body.find("vera (viewer) may not POST /api/v1/jobs: only admins and users may"),
      std::string::npos)
      << refused->body;
  EXPECT_TRUE(a.Authorize(As(kVera, "POST", "/api/v1/jobs/1/cancel")));
  // A worker joins and moves files, nothing else.
  EXPECT_FALSE(a.Authorize(As(kWorker, "GET", "/api/v1/worker")));
  EXPECT_FALSE(a.Authorize(As(kWorker, "PUT", "/api/v1/files/ab")));
  EXPECT_TRUE(a.Authorize(As(kWorker, "POST", "/api/v1/jobs")));
  EXPECT_TRUE(a.Authorize(As(kWorker, "GET", "/api/v1/jobs")));
  // A user does not join as a worker (it would be handed others' tasks).
  EXPECT_TRUE(a.Authorize(As(kAna, "GET", "/api/v1/worker")));
  // Admin-only routes, and a route without a rule.
  EXPECT_TRUE(a.Authorize(As(kAna, "POST", "/api/v1/workers/1/drain")));
  EXPECT_TRUE(a.Authorize(As(kAna, "GET", "/api/v1/users")));
  EXPECT_TRUE(a.Authorize(As(kAna, "GET", "/api/v1/audit")));
  EXPECT_TRUE(a.Authorize(As(kAna, "DELETE", "/api/v1/something-new")));
  EXPECT_FALSE(a.Authorize(As(kAdmin, "DELETE", "/api/v1/something-new")));
  EXPECT_FALSE(a.Authorize(As(kWorker, "GET", "/api/v1/whoami")));
  // A public path without a token is not asked about.
  net::Request anonymous;
  anonymous.method = "GET";
  anonymous.path = "/healthz";
  EXPECT_FALSE(a.Authorize(anonymous));
}

}  // namespace
}  // namespace drover::server
