// LanCluster: real `drover` processes spread over the hosts of a Lan — the
// server on "srv" (10.213.0.10:7210), workers on "w1".."w3" named after
// their host, redis-server on "rds" — with a temporary directory for state,
// work directories and the tasks' side files (the hosts share the file
// system; only the network is separate).
//
// The test itself is a client on "cli": the fixture enters that namespace
// (EnterNetns), so Drover() commands, Api() and an EventTap reach the server
// over the bridge like any other machine.
//
// The destructor stops workers with SIGTERM (so their tasks die with them),
// then the server and redis-server.
//
// Thread safety: the test's thread.
#ifndef DROVER_TESTS_MULTIHOST_LAN_CLUSTER_H_
#define DROVER_TESTS_MULTIHOST_LAN_CLUSTER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "../integration/process.h"
#include "cli/api_client.h"
#include "lan.h"
#include "net/client_options.h"

namespace drover::testing {

inline constexpr std::chrono::seconds kLanStartTimeout(30);
inline constexpr std::chrono::seconds kLanJobTimeout(90);
inline constexpr uint16_t kLanPort = 7210;

struct WorkerStart {
  std::vector<std::string> extra;  // more `drover worker` flags
  // Joins through the beacon (--discover --token-file) instead of --server.
  bool discover = false;
  // A private tmpfs of this size as the work directory ("1m"), mounted in
  // the worker's own mount namespace (gone with the worker).
  std::string tmpfs_size;
  bool wait_attached = true;
};

class LanCluster {
 public:
  // `server_flags` are added to `drover server`. `bind_all`: --bind 0.0.0.0
  // (the beacon then announces the interfaces' addresses) instead of
  // 10.213.0.10.
  LanCluster(Lan& lan, std::vector<std::string> server_flags, bool bind_all = false);
  ~LanCluster();

  const std::string& dir() const { return dir_; }
  std::string server_address() const;  // "10.213.0.10:7210"

  // Starts (or restarts, same state dir) the server and waits for its
  // readiness line; then writes the client access file (the server's
  // address as seen from other hosts).
  Process& StartServer();
  Process& server() { return *server_; }
  void KillServer(int signo);

  // Starts a worker on `host` (its --name is the host) and, unless told
  // not to, waits until it attached.
  Process& StartWorker(const std::string& host, const WorkerStart& how = {});
  Process& worker(const std::string& host) { return *workers_.at(host); }

  // redis-server on "rds" (nothing persisted); its URL for --redis.
  Status StartRedis();
  std::string redis_url() const;

  // Client side, from the calling thread's namespace (the test's: "cli").
  RunResult Drover(std::vector<std::string> args, std::chrono::seconds timeout = kLanJobTimeout);
  net::ClientOptions options() const;
  cli::ApiClient Api() const;
  nlohmann::json Get(const std::string& target);
  // The task's "worker" id mapped to a worker name ("w2"); empty if none.
  std::string WorkerOf(const nlohmann::json& task);

 private:
  Lan& lan_;
  std::string dir_;
  std::vector<std::string> server_flags_;
  bool bind_all_;
  std::string fingerprint_;
  std::unique_ptr<Process> server_;
  std::unique_ptr<Process> redis_;
  std::map<std::string, std::unique_ptr<Process>> workers_;
};

// Milliseconds since the epoch of a log line's spdlog timestamp
// ("[2026-11-30 19:01:02.345] ..."), local time; nullopt without one.
std::optional<int64_t> LogMillis(const std::string& line);
int64_t NowMillis();

}  // namespace drover::testing

#endif  // DROVER_TESTS_MULTIHOST_LAN_CLUSTER_H_
