#include "net/access_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "net/client_options.h"
#include "net/net_test_util.h"
#include "net/private_file.h"

namespace drover::net {
namespace {

using testing::TempDir;

AccessInfo Sample() {
  AccessInfo info;
  info.address = "10.0.0.5:7210";
  info.token = std::string(64, '7');
  info.fingerprint = std::string(64, 'c');
  info.tls = true;
  return info;
}

TEST(AccessFileTest, RoundTripWithMode0600) {
  TempDir dir;
  const std::string path = dir / "drover/access.json";
  ASSERT_TRUE(WriteAccessFile(path, Sample()).ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Result<AccessInfo> back = ReadAccessFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, Sample());

  Result<ClientOptions> options = ClientOptionsFromAccess(*back);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->host, "10.0.0.5");
  EXPECT_EQ(options->port, 7210);
  EXPECT_TRUE(options->tls);
}

TEST(AccessFileTest, PlainAccessNeedsNoFingerprint) {
  TempDir dir;
  AccessInfo info = Sample();
  info.tls = false;
  info.fingerprint.clear();
  ASSERT_TRUE(WriteAccessFile(dir / "a.json", info).ok());
  Result<AccessInfo> back = ReadAccessFile(dir / "a.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->tls);
}

TEST(AccessFileTest, RoundTripWithLocalSocket) {
  TempDir dir;
  AccessInfo info = Sample();
  info.address = "127.0.0.1:7210";
  info.socket = dir / "state/api.sock";
  ASSERT_TRUE(WriteAccessFile(dir / "a.json", info).ok());
  Result<AccessInfo> back = ReadAccessFile(dir / "a.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, info);
  EXPECT_EQ(back->socket, dir / "state/api.sock");
}

// A file written before the socket field existed still loads, with no
// socket; a file without a socket is written without the field.
TEST(AccessFileTest, FileWithoutSocketLoadsWithNone) {
  TempDir dir;
  const std::string path = dir / "old.json";
  ASSERT_TRUE(WritePrivateFile(path, R"({"address": "127.0.0.1:7210", "token": ")" +
                                         std::string(64, '7') +
                                         R"(", "fingerprint": "", "tls": false})")
                  .ok());
  Result<AccessInfo> back = ReadAccessFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->address, "127.0.0.1:7210");
  EXPECT_TRUE(back->socket.empty());

  ASSERT_TRUE(WriteAccessFile(dir / "new.json", Sample()).ok());
  Result<std::string> text = ReadWholeFile(dir / "new.json");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->find("socket"), std::string::npos) << *text;
}

// Each broken file is refused with a message naming the file and the fault.
TEST(AccessFileTest, ErrorsNameFileAndProblem) {
  TempDir dir;
  const std::string path = dir / "access.json";
  struct Case {
    std::string text;
    std::string expected;
  } cases[] = {
      {"{not json", "not valid JSON"},
      {"[1,2]", "JSON object"},
      {R"({"token":"ab","fingerprint":"","tls":false})", "\"address\""},
      {R"({"address":"h:1","token":"ab","fingerprint":"","tls":"yes"})", "\"tls\""},
      {R"({"address":"h:1","token":7,"fingerprint":"","tls":false})", "\"token\""},
      {R"({"address":"nohost","token":"ab","fingerprint":"","tls":false})", "\"address\""},
      {R"({"address":"h:99999","token":"ab","fingerprint":"","tls":false})", "port"},
      {R"({"address":"h:1","token":"ab","fingerprint":"xyz","tls":true})", "\"fingerprint\""},
      {R"({"address":"h:1","token":"ab","fingerprint":"","tls":false,"socket":5})", "\"socket\""},
      {R"({"address":"h:1","token":"ab","fingerprint":"","tls":false,"socket":"api.sock"})",
       "absolute path"},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(WritePrivateFile(path, c.text).ok());
    Result<AccessInfo> r = ReadAccessFile(path);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(r.status().message().rfind(path, 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos)
        << c.text << " -> " << r.status().message();
  }
  EXPECT_EQ(ReadAccessFile(dir / "missing.json").status().code(), StatusCode::kNotFound);
}

// Restores an environment variable when the test ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(AccessFileTest, LookupOrderExplicitThenEnvThenXdgThenHome) {
  ScopedEnv access("DROVER_ACCESS", "/env/access.json");
  ScopedEnv xdg("XDG_STATE_HOME", "/xdg");
  ScopedEnv home("HOME", "/home/u");
  EXPECT_EQ(ResolveAccessFilePath("/given.json").value_or(""), "/given.json");
  EXPECT_EQ(ResolveAccessFilePath("").value_or(""), "/env/access.json");
  {
    ScopedEnv no_access("DROVER_ACCESS", nullptr);
    EXPECT_EQ(ResolveAccessFilePath("").value_or(""), "/xdg/drover/access.json");
    ScopedEnv no_xdg("XDG_STATE_HOME", nullptr);
    EXPECT_EQ(ResolveAccessFilePath("").value_or(""), "/home/u/.local/state/drover/access.json");
    ScopedEnv no_home("HOME", nullptr);
    EXPECT_EQ(ResolveAccessFilePath("").status().code(), StatusCode::kFailedPrecondition);
  }
}

TEST(AccessFileTest, SplitHostPort) {
  Result<HostPort> v4 = SplitHostPort("127.0.0.1:7210");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 7210);
  Result<HostPort> v6 = SplitHostPort("[::1]:80");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_FALSE(SplitHostPort("host").ok());
  EXPECT_FALSE(SplitHostPort("host:").ok());
  EXPECT_FALSE(SplitHostPort("host:0").ok());
  EXPECT_FALSE(SplitHostPort("host:12ab").ok());
}

}  // namespace
}  // namespace drover::net
