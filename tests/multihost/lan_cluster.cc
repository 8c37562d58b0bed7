#include "lan_cluster.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>

#include "net/access_file.h"

namespace drover::testing {

LanCluster::LanCluster(Lan& lan, std::vector<std::string> server_flags, bool bind_all)
    : lan_(lan), server_flags_(std::move(server_flags)), bind_all_(bind_all) {
  char tmpl[] = "/tmp/drover_mh_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) ADD_FAILURE() << "mkdtemp failed";
  dir_ = tmpl;
}

LanCluster::~LanCluster() {
  for (auto& [host, w] : workers_) w->Signal(SIGTERM);
  for (auto& [host, w] : workers_) {
    if (!w->Wait(In(kLanStartTimeout)))
      ADD_FAILURE() << host << " ignored SIGTERM:\n" << w->output();
  }
  workers_.clear();
  server_.reset();
  redis_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string LanCluster::server_address() const {
  return Lan::Address("srv") + ":" + std::to_string(kLanPort);
}

Process& LanCluster::StartServer() {
  std::vector<std::string> argv = {DROVER_BINARY,   "server",
                                   "--bind",        bind_all_ ? "0.0.0.0" : Lan::Address("srv"),
                                   "--port",        std::to_string(kLanPort),
                                   "--state-dir",   dir_ + "/state",
                                   "--access-file", dir_ + "/server-access.json"};
  argv.insert(argv.end(), server_flags_.begin(), server_flags_.end());
  server_ = std::make_unique<Process>(lan_.Exec("srv", argv));
  if (!server_->WaitForLine("drover: listening on", In(kLanStartTimeout))) {
    ADD_FAILURE() << "server did not start:\n" << server_->output();
    return *server_;
  }
  Result<net::AccessInfo> access = net::ReadAccessFile(dir_ + "/server-access.json");
  if (!access.ok()) {
    ADD_FAILURE() << access.status().ToString();
    return *server_;
  }
  access->address = server_address();  // 127.0.0.1 with --bind 0.0.0.0
  fingerprint_ = access->fingerprint;
  Status written = net::WriteAccessFile(dir_ + "/access.json", *access);
  EXPECT_TRUE(written.ok()) << written.ToString();
  return *server_;
}

void LanCluster::KillServer(int signo) {
  if (!server_) return;
  server_->Signal(signo);
  EXPECT_TRUE(server_->Wait(In(kLanStartTimeout)).has_value()) << server_->output();
}

Process& LanCluster::StartWorker(const std::string& host, const WorkerStart& how) {
  const std::string workdir = dir_ + "/work-" + host;
  std::filesystem::create_directories(workdir);
  std::vector<std::string> argv;
  if (!how.tmpfs_size.empty()) {
    // The mount lives in the worker's own mount namespace and goes away
    // with it, also when the test dies.
    argv = {"unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount -t tmpfs -o size=" + how.tmpfs_size + " drover-mh \"$0\" && exec \"$@\"",
            workdir};
  }
  std::vector<std::string> worker = {
      DROVER_BINARY, "worker", "--name",        host,           "--workdir",          workdir,
      "--isolation", "none",   "--run-as-root", "--token-file", dir_ + "/state/token"};
  if (how.discover) {
    worker.push_back("--discover");
  } else {
    worker.insert(worker.end(), {"--server", server_address(), "--fingerprint", fingerprint_});
  }
  worker.insert(worker.end(), how.extra.begin(), how.extra.end());
  argv.insert(argv.end(), worker.begin(), worker.end());
  auto [it, inserted] =
      workers_.insert_or_assign(host, std::make_unique<Process>(lan_.Exec(host, argv)));
  Process& w = *it->second;
  if (how.wait_attached && !w.WaitForLine("attached as worker", In(kLanStartTimeout))) {
    ADD_FAILURE() << "worker " << host << " did not attach:\n" << w.output();
  }
  return w;
}

Status LanCluster::StartRedis() {
  const std::string redis = FindCommand("redis-server");
  if (redis.empty()) return NotFound("redis-server is not installed");
  redis_ = std::make_unique<Process>(
      lan_.Exec("rds", {redis, "--bind", Lan::Address("rds"), "--port", "6379", "--save", "",
                        "--appendonly", "no", "--protected-mode", "no", "--dir", dir_}));
  if (!redis_->WaitForLine("Ready to accept connections", In(kLanStartTimeout))) {
    return Unavailable("redis-server did not start: " + redis_->output());
  }
  return Status::Ok();
}

std::string LanCluster::redis_url() const { return "redis://" + Lan::Address("rds") + ":6379/0"; }

RunResult LanCluster::Drover(std::vector<std::string> args, std::chrono::seconds timeout) {
  std::vector<std::string> argv = {DROVER_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunToEnd(argv, In(timeout), {"DROVER_ACCESS=" + dir_ + "/access.json"});
}

net::ClientOptions LanCluster::options() const {
  Result<net::AccessInfo> access = net::ReadAccessFile(dir_ + "/access.json");
  EXPECT_TRUE(access.ok()) << access.status().ToString();
  Result<net::ClientOptions> o = access.ok() ? net::ClientOptionsFromAccess(*access)
                                             : Result<net::ClientOptions>(access.status());
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  net::ClientOptions out = o.ok() ? *o : net::ClientOptions{};
  out.timeout = std::chrono::seconds(20);
  return out;
}

cli::ApiClient LanCluster::Api() const { return cli::ApiClient(options()); }

nlohmann::json LanCluster::Get(const std::string& target) {
  cli::ApiClient api = Api();
  Result<nlohmann::json> j = api.Get(target);
  EXPECT_TRUE(j.ok()) << target << ": " << j.status().ToString();
  return j.ok() ? *j : nlohmann::json();
}

std::string LanCluster::WorkerOf(const nlohmann::json& task) {
  if (!task.contains("worker")) return "";
  nlohmann::json workers = Get("/api/v1/workers");
  for (const nlohmann::json& w : workers["workers"]) {
    if (w["id"] == task["worker"]) return w["name"].get<std::string>();
  }
  return "";
}

std::optional<int64_t> LogMillis(const std::string& line) {
  static const std::regex stamp(R"(\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{3})\])");
  std::smatch m;
  if (!std::regex_search(line, m, stamp)) return std::nullopt;
  std::tm tm{};
  tm.tm_year = std::stoi(m[1]) - 1900;
  tm.tm_mon = std::stoi(m[2]) - 1;
  tm.tm_mday = std::stoi(m[3]);
  tm.tm_hour = std::stoi(m[4]);
  tm.tm_min = std::stoi(m[5]);
  tm.tm_sec = std::stoi(m[6]);
  tm.tm_isdst = -1;
  const time_t t = mktime(&tm);
  return static_cast<int64_t>(t) * 1000 + std::stoi(m[7]);
}

int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace drover::testing
