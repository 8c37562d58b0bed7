#include "sim_cluster/sim_cluster.h"

#include <gtest/gtest.h>

#include <utility>

#include "net/pipe_session.h"
#include "proto/job_file.h"
#include "server/core_driver.h"
#include "worker/agent/server_link.h"

namespace drover::testing {

// The worker end of an in-memory connection to the current server, unless
// the worker is cut off.
class SimCluster::Link final : public worker::ServerLink {
 public:
  Link(SimCluster& cluster, std::string name) : cluster_(cluster), name_(std::move(name)) {}

  void Connect(const net::ClientOptions&, ConnectCallback done) override {
    // A later turn, as a real connect: the agent is not re-entered.
    cluster_.loop_.Post([this, done = std::move(done)] {
      if (cut_ || cluster_.server_ == nullptr) {
        done(Unavailable("cannot connect to the server: " + name_ + " is cut off"));
        return;
      }
      auto [worker_end, server_end] =
          net::PipeSession::MakePair(cluster_.loop_, "server:7210", name_ + ":7211");
      session_ = worker_end;
      cluster_.server_->AttachWorker(server_end);
      done(std::shared_ptr<net::WsSession>(worker_end));
    });
  }

  // The connection fails, and new ones fail while `cut` holds.
  void Break(bool cut, const std::string& why) {
    cut_ = cut;
    if (auto s = session_.lock()) s->Break(why);
  }
  void Mend() { cut_ = false; }

 private:
  SimCluster& cluster_;
  std::string name_;
  bool cut_ = false;
  std::weak_ptr<net::PipeSession> session_;
};

struct SimCluster::Worker {
  Worker(SimCluster& cluster, std::string n)
      : name(n), runner(cluster.clock_), link(cluster, std::move(n)) {}
  std::string name;
  worker::testing::FakeRunner runner;
  Link link;
  std::unique_ptr<worker::Agent> agent;
};

SimCluster::SimCluster(SimClusterOptions options) : options_(std::move(options)) {
  StartServer();
  for (int i = 0; i < options_.workers; ++i) {
    workers_.push_back(std::make_unique<Worker>(*this, "w" + std::to_string(i)));
    workers_.back()->runner.ExitOnKill(loop_);
    StartWorker(i);
  }
  // Every worker attached before the test begins.
  const bool attached = RunUntil(
      [&] {
        return scheduler().Workers().size() == static_cast<size_t>(options_.workers);
      },
      Seconds(10));
  EXPECT_TRUE(attached) << "the workers did not attach";
}

SimCluster::~SimCluster() {
  for (auto& w : workers_) w->agent.reset();
  if (server_) server_->Stop();
  server_.reset();
  loop_.Poll();
}

void SimCluster::StartServer() {
  server::ServerConfig config;
  config.state_dir = dir_ / "server";
  config.bind_address = "127.0.0.1";
  config.port = 0;
  config.tls = false;
  config.local_socket = false;
  config.access_file = "-";
  config.clock = &clock_;
  if (options_.server) options_.server(config);
  Result<std::unique_ptr<server::ServerShell>> started =
      server::ServerShell::Start(loop_, std::move(config));
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  server_ = std::move(started).value();
}

void SimCluster::StartWorker(int i) {
  Worker& w = *workers_.at(i);
  worker::AgentConfig config;
  config.servers = {"server:7210"};  // never dialled: the link is in-process
  config.tls = false;
  config.name = w.name;
  config.workdir = dir_ / w.name;
  config.isolation = "none";
  config.cpus = options_.cpus;
  config.mem = options_.mem;
  config.gpus = "none";
  config.gpu_lock_dir = dir_ / (w.name + "-gpu-locks");
  config.nvidia_smi = "";
  config.run_as_root = true;
  // No health checks: their thread would post on real time.
  config.health_interval = Duration::zero();
  config.reconnect.initial = Millis(100);
  config.reconnect.max = Seconds(1);
  config.clock = &clock_;
  config.server_link = &w.link;
  config.task_runner = &w.runner;
  if (options_.worker) options_.worker(config);
  w.link.Mend();
  Result<std::unique_ptr<worker::Agent>> agent = worker::Agent::Start(loop_, config);
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  w.agent = std::move(agent).value();
}

const core::Scheduler& SimCluster::scheduler() { return server_->driver().scheduler(); }

Result<JobId> SimCluster::Submit(std::string_view toml) {
  ASSIGN_OR_RETURN(core::JobSpec spec, proto::ParseJobToml(toml, "job.toml"));
  if (spec.user.empty()) spec.user = "tester";
  return server_->driver().Submit(std::make_shared<const core::JobSpec>(std::move(spec)));
}

std::optional<core::TaskInfo> SimCluster::Task(TaskId id) {
  Result<core::TaskInfo> info = scheduler().GetTask(id);
  if (!info.ok()) return std::nullopt;
  return *info;
}

core::TaskState SimCluster::StateOf(TaskId id) {
  std::optional<core::TaskInfo> info = Task(id);
  EXPECT_TRUE(info.has_value()) << "no task " << id.ToString();
  return info ? info->state : core::TaskState::kWaiting;
}

bool SimCluster::RunUntil(const std::function<bool()>& done, Duration limit) {
  return loop_.RunUntil(done, clock_.Now() + limit, Micros(0));
}

void SimCluster::RunFor(Duration d) { loop_.AdvanceBy(d); }

bool SimCluster::WaitForState(TaskId id, core::TaskState state, Duration limit) {
  return RunUntil([&] { return StateOf(id) == state; }, limit);
}

worker::testing::FakeRunner& SimCluster::runner(int i) { return workers_.at(i)->runner; }

bool SimCluster::alive(int i) const { return workers_.at(i)->agent != nullptr; }

int SimCluster::RunningOn(TaskId id) {
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i]->agent && workers_[i]->runner.Running(id)) return static_cast<int>(i);
  }
  return -1;
}

void SimCluster::Exit(TaskId id, int exit_code, std::string result) {
  const int on = RunningOn(id);
  ASSERT_GE(on, 0) << id.ToString() << " runs nowhere";
  workers_[on]->runner.Exit(id, exit_code, std::move(result));
}

void SimCluster::Partition(int i) { workers_.at(i)->link.Break(true, "partitioned by the test"); }

void SimCluster::Heal(int i) { workers_.at(i)->link.Mend(); }

void SimCluster::Kill(int i) {
  Worker& w = *workers_.at(i);
  w.link.Break(true, "killed by the test");
  w.agent.reset();
  w.runner.Forget();  // its tasks died with it: their ends are never reported
}

void SimCluster::RestartServer() {
  server_->Stop();
  server_.reset();
  loop_.Poll();
  StartServer();
}

}  // namespace drover::testing
