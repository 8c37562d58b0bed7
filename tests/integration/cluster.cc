#include "cluster.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "cli/connection.h"
#include "net/ws_client.h"

namespace drover::testing {

Cluster::Cluster(std::vector<std::string> server_flags) : server_flags_(std::move(server_flags)) {
  char tmpl[] = "/tmp/drover_it_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) ADD_FAILURE() << "mkdtemp failed";
  dir_ = tmpl;
}

Cluster::~Cluster() {
  // SIGTERM first: a worker stops the tasks it runs, so a failed test leaves
  // no task processes behind (SIGKILL, in ~Process, would orphan them).
  for (auto& w : workers_) w->Signal(SIGTERM);
  for (auto& w : workers_) {
    if (!w->Wait(In(kStartTimeout))) ADD_FAILURE() << "a worker ignored SIGTERM:\n" << w->output();
  }
  workers_.clear();
  server_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string Cluster::binary() const { return DROVER_BINARY; }

Process& Cluster::StartServer(std::vector<std::string> env) {
  std::vector<std::string> argv = {binary(),      "server",        "--bind",
                                   "127.0.0.1",   "--port",        std::to_string(port_),
                                   "--state-dir", dir_ + "/state", "--access-file",
                                   access_file()};
  argv.insert(argv.end(), server_flags_.begin(), server_flags_.end());
  server_ = std::make_unique<Process>(argv, std::move(env));
  std::optional<std::string> line =
      server_->WaitForLine("drover: listening on 127.0.0.1:", In(kStartTimeout));
  if (!line) {
    ADD_FAILURE() << "server did not start:\n" << server_->output();
    return *server_;
  }
  const size_t colon = line->find("127.0.0.1:") + 10;
  port_ = static_cast<uint16_t>(std::stoi(line->substr(colon)));
  return *server_;
}

void Cluster::KillServer(int signo) {
  if (!server_) return;
  server_->Signal(signo);
  EXPECT_TRUE(server_->Wait(In(kStartTimeout)).has_value()) << server_->output();
}

Process& Cluster::StartWorker(const std::string& name, std::vector<std::string> extra,
                              std::vector<std::string> env) {
  // The work directory's parent does not exist yet: a worker makes it, as
  // on a fresh account without ~/.local/state.
  std::vector<std::string> argv = {
      binary(),      "worker", "--access",     access_file(),
      "--name",      name,     "--workdir",    dir_ + "/workers/" + name + "/work",
      "--isolation", "none",   "--run-as-root"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  workers_.push_back(std::make_unique<Process>(argv, std::move(env)));
  Process& w = *workers_.back();
  if (!w.WaitForLine("attached as worker", In(kStartTimeout))) {
    ADD_FAILURE() << "worker " << name << " did not attach:\n" << w.output();
  }
  return w;
}

RunResult Cluster::Drover(std::vector<std::string> args, std::chrono::seconds timeout) {
  // Through the environment, not --access: a flag appended after `submit
  // ... -- CMD` would become part of the command.
  std::vector<std::string> argv = {binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunToEnd(argv, In(timeout), {"DROVER_ACCESS=" + access_file()});
}

cli::ApiClient Cluster::Api() {
  cli::ConnectionFlags flags;
  flags.access = access_file();
  Result<net::ClientOptions> options = cli::ResolveConnection(flags);
  EXPECT_TRUE(options.ok()) << options.status().ToString();
  return cli::ApiClient(options.ok() ? *options : net::ClientOptions{});
}

nlohmann::json Cluster::Get(const std::string& target) {
  cli::ApiClient api = Api();
  Result<nlohmann::json> j = api.Get(target);
  EXPECT_TRUE(j.ok()) << target << ": " << j.status().ToString();
  return j.ok() ? *j : nlohmann::json();
}

std::string Cluster::WriteFile(const std::string& name, const std::string& text) const {
  const std::string path = dir_ + "/" + name;
  std::ofstream out(path);
  out << text;
  if (!out.flush()) ADD_FAILURE() << "cannot write " << path;
  return path;
}

EventTap::EventTap(const net::ClientOptions& options, uint64_t job) {
  net::ConnectWebSocket(
      loop_, options, "/api/v1/events?job=" + std::to_string(job),
      [this](Result<std::shared_ptr<net::WsSession>> s) {
        if (!s.ok()) {
          ADD_FAILURE() << "event stream: " << s.status().ToString();
          return;
        }
        session_ = *s;
        session_->OnText([this](std::string text) {
          Result<cli::TaskEventView> e = cli::DecodeTaskEventView(text);
          if (!e.ok()) return;
          std::lock_guard<std::mutex> lock(mu_);
          events_.push_back(*e);
          cv_.notify_all();
        });
        session_->OnClose([](const Status&) {});
      });
  thread_ = std::thread([this] { loop_.Run(); });
}

EventTap::~EventTap() {
  loop_.Post([this] {
    if (session_) session_->Close("test over");
    session_.reset();
    loop_.Stop();
  });
  thread_.join();
}

bool EventTap::WaitFor(const std::function<bool(const std::vector<cli::TaskEventView>&)>& pred,
                       std::chrono::seconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return pred(events_); });
}

bool EventTap::WaitForState(const std::string& task, const std::string& state, uint32_t attempt) {
  return WaitFor([&](const std::vector<cli::TaskEventView>& events) {
    for (const auto& e : events) {
      if (e.task == task && e.to == state && (attempt == 0 || e.attempt == attempt)) return true;
    }
    return false;
  });
}

bool EventTap::WaitForTasksIn(const std::string& state, size_t n) {
  return WaitFor([&](const std::vector<cli::TaskEventView>& events) {
    std::set<std::string> tasks;
    for (const auto& e : events) {
      if (e.to == state) tasks.insert(e.task);
    }
    return tasks.size() >= n;
  });
}

uint64_t SubmittedJob(const RunResult& r) {
  EXPECT_EQ(r.status, 0) << r.output;
  // The id is stdout's one line; stderr (merged) may add warnings.
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) {
      return std::stoull(line);
    }
  }
  return 0;
}

uint64_t RunJobId(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("job ([0-9]+) \""))) return 0;
  return std::stoull(m[1]);
}

uint64_t Post(Cluster& c, const nlohmann::json& spec) {
  Result<nlohmann::json> posted = c.Api().Post("/api/v1/jobs", spec.dump());
  EXPECT_TRUE(posted.ok()) << posted.status().ToString();
  return posted.ok() ? (*posted)["id"].get<uint64_t>() : 0;
}

std::vector<std::string> Submit(std::vector<std::string> flags, std::vector<std::string> cmd) {
  std::vector<std::string> argv = {"submit"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

std::vector<std::string> RecordingTask(const std::string& runs, const std::string& then) {
  return {"sh", "-c", "echo run >> " + runs + "$DROVER_TASK_INDEX; " + then};
}

std::vector<std::string> HoldingTask(const std::string& runs, const std::string& go) {
  return RecordingTask(runs, "while [ ! -e " + go + " ]; do sleep 0.05; done");
}

void ExpectEachTaskRanOnceInAttempt1(Cluster& c, uint64_t job, const std::string& runs,
                                     size_t tasks) {
  nlohmann::json info = c.Get("/api/v1/jobs/" + std::to_string(job));
  ASSERT_EQ(info["tasks"].size(), tasks) << info.dump(2);
  for (const nlohmann::json& t : info["tasks"]) {
    EXPECT_EQ(t["state"], "succeeded") << t.dump(2);
    EXPECT_EQ(t["attempt"], 1) << "re-attached or adopted, not re-run: " << t.dump(2);
    const std::string index = std::to_string(t["array_index"].get<int64_t>());
    EXPECT_EQ(Lines(runs + index), std::vector<std::string>{"run"}) << "task " << index;
  }
}

void StartHeldJobs(Cluster& c, HeldJobs* jobs) {
  // One core: the three tasks run one after another, so when the server
  // dies one runs and two are queued.
  c.StartWorker("solo", {"--cpus", "0"});
  jobs->go = c.dir() + "/go";
  jobs->runs = c.dir() + "/runs.";
  jobs->hold = SubmittedJob(
      c.Drover(Submit({"--name", "hold", "--array", "0-2"}, HoldingTask(jobs->runs, jobs->go))));
  ASSERT_GT(jobs->hold, 0u);
  jobs->later = SubmittedJob(
      c.Drover(Submit({"--name", "later", "--after", std::to_string(jobs->hold)}, {"true"})));
  ASSERT_GT(jobs->later, 0u);
  EventTap tap(c.Api().options(), jobs->hold);
  ASSERT_TRUE(tap.WaitForTasksIn("running", 1));
}

void FinishHeldJobs(Cluster& c, const HeldJobs& jobs) {
  nlohmann::json listed = c.Get("/api/v1/jobs");
  ASSERT_EQ(listed["jobs"].size(), 2u) << listed.dump(2);
  std::ofstream(jobs.go) << "go\n";
  RunResult wait = c.Drover({"wait", std::to_string(jobs.later)});
  EXPECT_EQ(wait.status, 0) << wait.output << "\nserver:\n" << c.server()->output();
  ExpectEachTaskRanOnceInAttempt1(c, jobs.hold, jobs.runs, 3);
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void KillRecorded(const std::string& path) {
  for (const std::string& pid : Lines(path)) {
    if (!pid.empty()) kill(std::stoi(pid), SIGKILL);
  }
}

// Waits until `path` exists (made by a rename into `dir`), on inotify.
bool WaitForFile(const std::string& dir, const std::string& path, Deadline deadline) {
  const int in = inotify_init1(IN_CLOEXEC);
  if (in < 0) return false;
  inotify_add_watch(in, dir.c_str(), IN_MOVED_TO | IN_CREATE | IN_CLOSE_WRITE);
  bool found = false;
  while (!(found = std::filesystem::exists(path)) && std::chrono::steady_clock::now() < deadline) {
    pollfd p{in, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) == 1) {
      char buf[4096];
      (void)!read(in, buf, sizeof buf);
    }
  }
  close(in);
  return found;
}

}  // namespace drover::testing
