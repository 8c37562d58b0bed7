// FilePlane between two real instances on loopback: outputs collected into
// the cache, served only against a grant the "server" key signed for that
// file, that requester and a time not past; fetched, verified and linked
// into a task's inputs; fetched once however many tasks ask.
#include "worker/agent/file_plane.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "net/grant.h"
#include "net/http_client.h"
#include "net/net_test_util.h"
#include "net/server.h"

namespace drover::worker {
namespace {

using net::testing::TempDir;

constexpr char kToken[] = "file-plane-test-token";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

class FilePlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<net::GrantSigner> signer = net::GrantSigner::Create();
    ASSERT_TRUE(signer.ok()) << signer.status().ToString();
    signer_.emplace(std::move(signer).value());
    holder_ = StartPlane("holder");
    fetcher_ = StartPlane("fetcher");
    ASSERT_TRUE(holder_ && fetcher_);
    holder_->Attached(signer_->public_key(), 1);
    fetcher_->Attached(signer_->public_key(), 2);
    thread_ = std::thread([this] { loop_.Run(); });
  }
  void TearDown() override {
    loop_.Stop();
    if (thread_.joinable()) thread_.join();
    holder_.reset();
    fetcher_.reset();
  }

  std::unique_ptr<FilePlane> StartPlane(const std::string& name) {
    FilePlaneOptions o;
    o.cache_dir = dir_ / (name + "/cache");
    o.tls_dir = dir_ / (name + "/tls");
    o.cache_bytes = 64 << 20;
    o.bind_address = "127.0.0.1";
    o.token = kToken;
    o.max_output_bytes = 8 << 20;
    ::mkdir((dir_ / name).c_str(), 0700);
    Result<std::unique_ptr<FilePlane>> plane = FilePlane::Start(loop_, o);
    EXPECT_TRUE(plane.ok()) << plane.status().ToString();
    return plane.ok() ? std::move(plane).value() : nullptr;
  }

  // Collects the outputs of `dir` on the holder (on the loop thread).
  Result<std::vector<core::OutputFile>> Collect(const std::string& dir, const OutputCap& cap = {},
                                                JobId job = 1) {
    std::promise<Result<std::vector<core::OutputFile>>> got;
    loop_.Post([&] {
      holder_->CollectOutputs(dir, job, cap, [&](Result<std::vector<core::OutputFile>> r) {
        got.set_value(std::move(r));
      });
    });
    return got.get_future().get();
  }

  Status Fetch(const proto::Assignment& a) {
    std::promise<Status> got;
    loop_.Post([&] { fetcher_->Fetch(a, [&](Status s) { got.set_value(std::move(s)); }); });
    return got.get_future().get();
  }

  net::HttpClient HolderClient(const std::string& token = kToken) {
    net::ClientOptions o;
    o.host = "127.0.0.1";
    o.port = holder_->port();
    o.fingerprint = holder_->fingerprint();
    o.token = token;
    return net::HttpClient(o);
  }

  int Ask(const std::string& sha, const std::string& grant, const std::string& requester,
          std::string* body = nullptr, const std::string& token = kToken) {
    net::ClientRequest r;
    r.target = "/v1/files/" + sha;
    if (!grant.empty()) r.headers["X-Drover-Grant"] = grant;
    r.headers["X-Drover-Requester"] = requester;
    Result<net::Response> got = HolderClient(token).Send(r);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok()) return 0;
    if (body) *body = got->body;
    return got->status;
  }

  proto::InputFile Input(const core::OutputFile& file) {
    proto::InputFile f;
    f.from = TaskId{1, 0};
    f.file = file;
    f.sources.push_back(proto::FileSource{1, "127.0.0.1", holder_->port(), holder_->fingerprint()});
    f.grant = signer_->Sign(net::Grant{file.sha256, "w2", RealClock().Now() + Seconds(60)});
    return f;
  }

  TempDir dir_;
  net::EventLoop loop_;
  std::optional<net::GrantSigner> signer_;
  std::unique_ptr<FilePlane> holder_;
  std::unique_ptr<FilePlane> fetcher_;
  std::thread thread_;
};

TEST_F(FilePlaneTest, ServesAFileOnlyAgainstAGrantForThatFileRequesterAndTime) {
  const std::string out = dir_ / "out";
  ::mkdir(out.c_str(), 0700);
  WriteAll(out + "/model.bin", std::string(300000, 'm'));
  WriteAll(out + "/other.bin", "other");
  Result<std::vector<core::OutputFile>> outputs = Collect(out);
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  ASSERT_EQ(outputs->size(), 2u);
  const std::string sha = (*outputs)[0].sha256;
  const std::string other = (*outputs)[1].sha256;
  const Time now = RealClock().Now();
  const std::string good = signer_->Sign(net::Grant{sha, "w2", now + Seconds(60)});

  std::string body;
  EXPECT_EQ(Ask(sha, good, "w2", &body), 200);
  EXPECT_EQ(body, std::string(300000, 'm'));

  // Hostile requests: each refused, none served.
  EXPECT_EQ(Ask(other, good, "w2", &body), 403) << "a grant for another file";
  EXPECT_NE(body.find("another file"), std::string::npos) << body;
  EXPECT_EQ(Ask(sha, signer_->Sign(net::Grant{sha, "w2", now - Seconds(1)}), "w2", &body), 403);
  EXPECT_NE(body.find("expired"), std::string::npos) << body;
  EXPECT_EQ(Ask(sha, good, "w3", &body), 403) << "a grant for another requester";
  EXPECT_EQ(Ask(sha, "", "w2", &body), 403) << "no grant";
  Result<net::GrantSigner> stranger = net::GrantSigner::Create();
  ASSERT_TRUE(stranger.ok());
  EXPECT_EQ(Ask(sha, stranger->Sign(net::Grant{sha, "w2", now + Seconds(60)}), "w2", &body), 403)
      << "signed by another key";
  EXPECT_EQ(Ask(sha, good, "w2", &body, "wrong-token"), 401);
  EXPECT_EQ(
      Ask(std::string(64, '0'),
          signer_->Sign(net::Grant{std::string(64, '0'), "w2", now + Seconds(60)}), "w2", &body),
      404)
      << "a granted file that is not here";
  const FilePlaneStats stats = holder_->stats();
  EXPECT_EQ(stats.served_files, 1u);
  EXPECT_EQ(stats.served_bytes, 300000u);
  EXPECT_EQ(stats.refused, 6u);
}

TEST_F(FilePlaneTest, FetchesVerifiesLinksAndFetchesEachFileOnce) {
  const std::string out = dir_ / "out";
  ::mkdir(out.c_str(), 0700);
  ::mkdir((out + "/sub").c_str(), 0700);
  WriteAll(out + "/sub/data.csv", std::string(2 << 20, 'd'));
  Result<std::vector<core::OutputFile>> outputs = Collect(out);
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  ASSERT_EQ(outputs->size(), 1u);
  EXPECT_EQ((*outputs)[0].name, "sub/data.csv");

  proto::Assignment a;
  a.task = TaskId{1, 1};
  a.attempt = 1;
  a.files = {Input((*outputs)[0])};
  EXPECT_FALSE(fetcher_->HasInputs(a));
  // Two attempts ask at once: one transfer.
  proto::Assignment b = a;
  b.task = TaskId{1, 2};
  std::promise<Status> first, second;
  loop_.Post([&] {
    fetcher_->Fetch(a, [&](Status s) { first.set_value(s); });
    fetcher_->Fetch(b, [&](Status s) { second.set_value(s); });
  });
  EXPECT_TRUE(first.get_future().get().ok());
  EXPECT_TRUE(second.get_future().get().ok());
  EXPECT_TRUE(fetcher_->HasInputs(a));
  EXPECT_EQ(holder_->stats().served_files, 1u);
  EXPECT_EQ(fetcher_->stats().fetched_files, 1u);

  const std::string inputs = dir_ / "inputs";
  ::mkdir(inputs.c_str(), 0700);
  std::promise<Status> linked;
  loop_.Post([&] { linked.set_value(fetcher_->LinkInputs(a, inputs)); });
  ASSERT_TRUE(linked.get_future().get().ok());
  const std::string path = inputs + "/1.0/sub/data.csv";
  EXPECT_EQ(ReadAll(path), std::string(2 << 20, 'd'));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u) << "a task cannot write the cached copy";

  // A file the holder lacks: the attempt's fetch fails, naming it.
  core::OutputFile missing{"gone.bin", 10, std::string(64, 'e')};
  proto::Assignment c;
  c.task = TaskId{1, 3};
  c.files = {Input(missing)};
  Status failed = Fetch(c);
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("1.0/gone.bin"), std::string::npos) << failed.ToString();
}

// No holder could be reached: the fetcher asks the server to pull the file
// (here a stand-in that answers 202 once, then 200) and downloads it from
// the server's store, checked like any input. A holder that answers, with
// a refusal, is not bypassed.
TEST_F(FilePlaneTest, AnUnreachableHolderIsBypassedThroughTheServerARefusingOneIsNot) {
  const std::string out = dir_ / "relayed";
  ::mkdir(out.c_str(), 0700);
  const std::string content(1 << 20, 'r');
  WriteAll(out + "/m.bin", content);
  Result<std::vector<core::OutputFile>> outputs = Collect(out);
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  const core::OutputFile file = (*outputs)[0];

  std::atomic<int> pulls{0};
  std::string pull_body;
  std::unique_ptr<net::Server> server;
  std::promise<uint16_t> started;
  loop_.Post([&] {
    net::ServerOptions so;
    so.bind_address = "127.0.0.1";
    so.port = 0;
    so.tls = false;
    so.token = kToken;
    server = std::make_unique<net::Server>(loop_, so);
    server->Route("POST", "/api/v1/files/{sha256}/pull",
                  [&](const net::Request& r, net::Responder done) {
                    const int n = ++pulls;
                    pull_body = r.body;
                    done(n == 1 ? net::JsonResponse(R"({"received":1,"pulling":true})", 202)
                                : net::JsonResponse(R"({"relayed":true})"));
                  });
    server->Route("GET", "/api/v1/files/{sha256}", [&](const net::Request& r, net::Responder done) {
      if (r.path_params.at("sha256") != file.sha256) {
        return done(net::ErrorResponse(NotFound("no such file")));
      }
      net::Response answer;
      answer.content_type = "application/octet-stream";
      answer.body = content;
      done(std::move(answer));
    });
    Status s = server->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
    net::ClientOptions to;
    to.host = "127.0.0.1";
    to.port = server->port();
    to.tls = false;
    to.token = kToken;
    fetcher_->SetServer(to);
    started.set_value(server->port());
  });
  ASSERT_NE(started.get_future().get(), 0);

  // A port nobody listens on: "Connection refused".
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const uint16_t dead_port = ntohs(addr.sin_port);
  ::close(fd);

  proto::Assignment a;
  a.task = TaskId{1, 4};
  a.attempt = 1;
  a.files = {Input(file)};
  a.files[0].sources[0].port = dead_port;
  Status fetched = Fetch(a);
  ASSERT_TRUE(fetched.ok()) << fetched.ToString();
  EXPECT_EQ(pulls.load(), 2) << "asked again after the 202";
  const nlohmann::json asked = nlohmann::json::parse(pull_body, nullptr, false);
  EXPECT_EQ(asked.value("task", ""), "1.0") << pull_body;
  EXPECT_EQ(asked.value("from", 0), 1) << pull_body;
  EXPECT_TRUE(fetcher_->HasInputs(a));
  EXPECT_EQ(fetcher_->stats().relayed_files, 1u);
  EXPECT_EQ(fetcher_->stats().relayed_bytes, content.size());
  EXPECT_EQ(holder_->stats().served_files, 0u);

  // The holder answers 404 (it lacks the file): a refusal, not bypassed.
  core::OutputFile missing{"gone.bin", 10, std::string(64, 'e')};
  proto::Assignment b;
  b.task = TaskId{1, 5};
  b.files = {Input(missing)};
  Status refused = Fetch(b);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.message().find("through the server"), std::string::npos) << refused.ToString();
  EXPECT_EQ(pulls.load(), 2);

  std::promise<void> stopped;
  loop_.Post([&] {
    server.reset();
    stopped.set_value();
  });
  stopped.get_future().get();
}

TEST_F(FilePlaneTest, OutputsThatAreNotRegularFilesOrTooLargeAreRefused) {
  const std::string out = dir_ / "sock";
  ::mkdir(out.c_str(), 0700);
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = out + "/s";
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  Result<std::vector<core::OutputFile>> refused = Collect(out);
  ::close(fd);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("socket"), std::string::npos)
      << refused.status().ToString();

  const std::string big = dir_ / "big";
  ::mkdir(big.c_str(), 0700);
  WriteAll(big + "/huge", std::string(9 << 20, 'h'));  // over max_output (8 MiB)
  Result<std::vector<core::OutputFile>> over = Collect(big);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("max_output"), std::string::npos)
      << over.status().ToString();
}

// The cap an assignment carries (the task's max_output, else the
// server's) meets the worker's own --max-output (8 MiB here): the lower
// applies, and the reason says whose it was.
TEST_F(FilePlaneTest, TheLowerOfTheAssignedAndTheWorkersOutputCapAppliesAndIsNamed) {
  proto::Assignment a;
  EXPECT_EQ(OutputCapOf(a).bytes, 0u);
  a.max_output_bytes = 2 << 20;
  EXPECT_EQ(OutputCapOf(a).whose, "the server's --max-output");
  a.max_output_by_task = true;
  const OutputCap task = OutputCapOf(a);
  EXPECT_EQ(task.bytes, 2u << 20);
  EXPECT_EQ(task.whose, "the task's");

  const std::string out = dir_ / "three";
  ::mkdir(out.c_str(), 0700);
  WriteAll(out + "/three.bin", std::string(3 << 20, 't'));
  Result<std::vector<core::OutputFile>> over = Collect(out, task);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(), "outputs are 3 MiB, more than max_output 2 MiB (the task's)");
  EXPECT_TRUE(Collect(out, OutputCap{4 << 20, "the task's"}).ok());
  EXPECT_TRUE(Collect(out).ok()) << "under the worker's 8 MiB";

  const std::string big = dir_ / "nine";
  ::mkdir(big.c_str(), 0700);
  WriteAll(big + "/nine.bin", std::string(9 << 20, 'n'));
  over = Collect(big, OutputCap{64 << 20, "the server's --max-output"});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(),
            "outputs are 9 MiB, more than max_output 8 MiB (worker --max-output)");
}

// A succeeded task's outputs are kept for its job until the server
// releases it, across a restart of the plane on the same cache.
TEST_F(FilePlaneTest, CollectedOutputsAreKeptForTheirJobUntilReleased) {
  const std::string out = dir_ / "kept";
  ::mkdir(out.c_str(), 0700);
  WriteAll(out + "/a.bin", "aaaa");
  Result<std::vector<core::OutputFile>> outputs = Collect(out, {}, 5);
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  ASSERT_TRUE(Collect(out, {}, 7).ok());  // the same file for another job
  EXPECT_EQ(holder_->KeptJobs(), (std::vector<JobId>{5, 7}));
  EXPECT_EQ(ReadAll(dir_ / "holder/cache/.keep/5"), (*outputs)[0].sha256 + "\n");

  // Restarted on the same cache: still kept.
  loop_.Stop();
  thread_.join();
  holder_.reset();
  holder_ = StartPlane("holder");
  ASSERT_NE(holder_, nullptr);
  EXPECT_EQ(holder_->KeptJobs(), (std::vector<JobId>{5, 7}));
  holder_->ReleaseOutputs({5, 99});
  EXPECT_EQ(holder_->KeptJobs(), (std::vector<JobId>{7}));
  EXPECT_EQ(::access((dir_ / "holder/cache/.keep/5").c_str(), F_OK), -1);
}

}  // namespace
}  // namespace drover::worker
