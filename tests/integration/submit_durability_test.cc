// `drover submit --wait` against a journal that is slower than the task:
// the server assigns a task before the job's record is durable (server
// README, Durability), so the task can end before the POST is answered.
// The CLI must then still report the job's outcome and exit status, and it
// must never report anything for a job whose POST answer never came (a job
// that was not durable may be gone after a crash).
//
// A slow journal is made with the test hook DROVER_TEST_FREEZE_JOURNAL
// (server/core_driver.h): while its file exists nothing becomes durable, so
// every POST waits; removing it lets the next flush make everything durable.
#include <signal.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "cluster.h"
#include "net/event_loop.h"
#include "net/ws_client.h"

namespace drover::testing {
namespace {

// Every job's task states (/api/v1/events without ?job=), open before the
// constructor returns, so it sees jobs created afterwards from their first
// change (their ids are not known until their POST is answered).
class AllJobsTap {
 public:
  explicit AllJobsTap(const net::ClientOptions& options) {
    net::ConnectWebSocket(loop_, options, "/api/v1/events",
                          [this](Result<std::shared_ptr<net::WsSession>> s) {
                            std::lock_guard<std::mutex> lock(mu_);
                            if (!s.ok()) {
                              error_ = s.status().ToString();
                              cv_.notify_all();
                              return;
                            }
                            session_ = *s;
                            session_->OnText([this](std::string text) {
                              Result<cli::TaskEventView> e = cli::DecodeTaskEventView(text);
                              if (!e.ok()) return;
                              std::lock_guard<std::mutex> l(mu_);
                              states_[e->task] = e->to;
                              cv_.notify_all();
                            });
                            session_->OnClose([](const Status&) {});
                            open_ = true;
                            cv_.notify_all();
                          });
    thread_ = std::thread([this] { loop_.Run(); });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kStartTimeout, [this] { return open_ || !error_.empty(); });
    EXPECT_TRUE(open_) << "event stream: " << error_;
  }

  ~AllJobsTap() {
    loop_.Post([this] {
      if (session_) session_->Close("test over");
      session_.reset();
      loop_.Stop();
    });
    thread_.join();
  }

  // Waits until `n` tasks are in a terminal state; returns each task's state.
  std::map<std::string, std::string> WaitForEnded(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    auto ended = [this] {
      std::map<std::string, std::string> out;
      for (const auto& [task, state] : states_) {
        if (cli::IsTerminalStateName(state)) out[task] = state;
      }
      return out;
    };
    cv_.wait_for(lock, kJobTimeout, [&] { return ended().size() >= n; });
    return ended();
  }

 private:
  net::EventLoop loop_;
  std::thread thread_;
  std::shared_ptr<net::WsSession> session_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  std::string error_;
  std::map<std::string, std::string> states_;  // task -> latest state
};

// The job id `submit --wait` printed on its first line; 0 when none.
uint64_t FirstLineJob(const std::string& output) {
  const std::string first = output.substr(0, output.find('\n'));
  if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoull(first);
}

std::unique_ptr<Process> StartSubmitWait(Cluster& c, std::vector<std::string> command) {
  std::vector<std::string> argv = {c.binary(), "submit", "--wait", "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return std::make_unique<Process>(argv, std::vector<std::string>{"DROVER_ACCESS=" +
                                                                  c.access_file()});
}

TEST(SubmitDurabilityTest, TasksThatEndBeforeTheJobIsDurableAreReportedOnceItIs) {
  Cluster c;
  const std::string freeze = c.dir() + "/freeze";
  Process& server = c.StartServer({"DROVER_TEST_FREEZE_JOURNAL=" + freeze});
  c.StartWorker("w1", {"--cpus", "0,1"});
  AllJobsTap tap(c.Api().options());

  std::ofstream(freeze) << "freeze\n";
  std::unique_ptr<Process> ok = StartSubmitWait(c, {"true"});
  std::unique_ptr<Process> failing = StartSubmitWait(c, {"sh", "-c", "exit 3"});
  // Both tasks run and end while neither job is durable ...
  std::map<std::string, std::string> ended = tap.WaitForEnded(2);
  ASSERT_EQ(ended.size(), 2u) << server.output();
  EXPECT_TRUE(server.WaitForLine("the journal is frozen", In(kStartTimeout))) << server.output();
  // ... and neither client has reported anything: no job id, no outcome.
  EXPECT_FALSE(ok->Wait(In(std::chrono::milliseconds(0))).has_value()) << ok->output();
  EXPECT_FALSE(failing->Wait(In(std::chrono::milliseconds(0))).has_value()) << failing->output();
  EXPECT_EQ(ok->output(), "");
  EXPECT_EQ(failing->output(), "");

  // The journal moves again: the next flush (this submission's) makes both
  // jobs durable, their POSTs are answered, and each client learns from the
  // event stream's snapshot that its task has already ended.
  std::filesystem::remove(freeze);
  ASSERT_GT(SubmittedJob(c.Drover({"submit", "--", "true"})), 0u);

  std::optional<int> ok_status = ok->Wait(In(kJobTimeout));
  ASSERT_TRUE(ok_status.has_value()) << ok->output();
  EXPECT_EQ(*ok_status, 0) << ok->output();
  const uint64_t ok_job = FirstLineJob(ok->output());
  ASSERT_GT(ok_job, 0u) << ok->output();
  EXPECT_EQ(ended[std::to_string(ok_job) + ".0"], "succeeded");

  std::optional<int> failing_status = failing->Wait(In(kJobTimeout));
  ASSERT_TRUE(failing_status.has_value()) << failing->output();
  EXPECT_EQ(*failing_status, 1) << failing->output();
  const uint64_t failing_job = FirstLineJob(failing->output());
  ASSERT_GT(failing_job, 0u) << failing->output();
  EXPECT_EQ(ended[std::to_string(failing_job) + ".0"], "failed");
  EXPECT_NE(failing->output().find("job " + std::to_string(failing_job) + ": 1 failed"),
            std::string::npos)
      << failing->output();
}

TEST(SubmitDurabilityTest, AJobWhosePostWasNeverAnsweredIsNotReported) {
  Cluster c;
  const std::string freeze = c.dir() + "/freeze";
  c.StartServer({"DROVER_TEST_FREEZE_JOURNAL=" + freeze});
  c.StartWorker("w1");
  std::unique_ptr<Process> cli;
  {
    AllJobsTap tap(c.Api().options());
    std::ofstream(freeze) << "freeze\n";
    cli = StartSubmitWait(c, {"true"});
    std::map<std::string, std::string> ended = tap.WaitForEnded(1);
    ASSERT_EQ(ended.size(), 1u);
    EXPECT_EQ(ended.begin()->second, "succeeded");
  }
  // The task succeeded, but its job never became durable: the server dies
  // before answering, and the client must say it does not know.
  EXPECT_FALSE(cli->Wait(In(std::chrono::milliseconds(0))).has_value()) << cli->output();
  c.KillServer(SIGKILL);
  std::optional<int> status = cli->Wait(In(kStartTimeout));
  ASSERT_TRUE(status.has_value()) << cli->output();
  EXPECT_EQ(*status, 1) << cli->output();
  EXPECT_EQ(FirstLineJob(cli->output()), 0u) << cli->output();
  EXPECT_NE(cli->output().find("drover: "), std::string::npos) << cli->output();

  // And indeed the restarted server has no such job.
  std::filesystem::remove(freeze);
  c.StartServer();
  EXPECT_TRUE(c.Get("/api/v1/jobs")["jobs"].empty()) << c.Get("/api/v1/jobs").dump();
}

}  // namespace
}  // namespace drover::testing
