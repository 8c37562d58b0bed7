// WorkerState on a simulated clock: each test feeds events the way the
// agent shell would and asserts the exact commands that came out (one line
// each, DescribeCommand), then, by comparing the whole list, that nothing
// more was emitted. No process, no socket, no wall time.
#include "worker/state/worker_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/quantity.h"

namespace drover::worker {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TaskId T(uint32_t index) { return TaskId{7, index}; }

// An assignment of task 7.<index>, attempt 1 unless told, on `core`.
class AssignmentBuilder {
 public:
  explicit AssignmentBuilder(uint32_t index) {
    a_.task = T(index);
    a_.attempt = 1;
    a_.cores = {index % 4};
    a_.cpu_quota_milli = 1000;
    a_.mem_limit_bytes = kGiB;
    a_.argv = {"run"};
  }
  AssignmentBuilder& Attempt(uint32_t n) { a_.attempt = n; return *this; }
  AssignmentBuilder& Core(uint32_t core) { a_.cores = {core}; return *this; }
  AssignmentBuilder& Mem(uint64_t bytes) { a_.mem_limit_bytes = bytes; return *this; }
  AssignmentBuilder& Gpu(uint32_t index) {
    a_.gpus = {core::GpuGrant{index, 100, 0}};
    return *this;
  }
  AssignmentBuilder& Vacate(int32_t signal, Duration grace) {
    a_.vacate_signal = signal;
    a_.vacate_grace = grace;
    return *this;
  }
  AssignmentBuilder& Disk(uint64_t bytes) {
    a_.disk_bytes = bytes;
    return *this;
  }
  AssignmentBuilder& After(uint32_t index, uint32_t attempt = 1) {
    a_.after = proto::TaskAttempt{T(index), attempt};
    return *this;
  }
  proto::Assignment Build() const { return a_; }

 private:
  proto::Assignment a_;
};

// One worker's state machine with 4 cores and 16 GiB, a simulated clock and
// a recorded outbox. Heartbeat 2 s and lease 30 s until attached; Attach
// gives heartbeat 1 s and lease 10 s (a fencing budget of 8 s).
class TestWorker {
 public:
  explicit TestWorker(Duration idle_timeout = Duration::zero(),
                      WorkerStateConfig::Desktop desktop = {}, uint64_t min_available = 0) {
    WorkerStateConfig config;
    config.idle_timeout = idle_timeout;
    config.desktop = desktop;
    config.min_available_bytes = min_available;
    config.name = "w";
    config.key = "key";
    config.agent_version = "test";
    config.capacity.cores = {0, 1, 2, 3};
    config.capacity.memory_bytes = 16 * kGiB;
    Result<WorkerState> state = WorkerState::Create(std::move(config), clock.Now());
    EXPECT_TRUE(state.ok()) << state.status().ToString();
    state_.emplace(std::move(state).value());
    Feed(AgentBegan{});
    Take();
  }

  void Feed(const WorkerEvent& event) {
    WorkerOutbox out;
    state_->Handle(clock.Now(), event, out);
    for (WorkerCommand& command : out) {
      if (std::holds_alternative<LogLine>(command)) {
        logs_.push_back(DescribeCommand(command, clock.Now()));
        continue;
      }
      lines_.push_back(DescribeCommand(command, clock.Now()));
      commands_.push_back(std::move(command));
    }
  }
  // The log lines emitted since the last TakeLogs (kept apart from Take).
  std::vector<std::string> TakeLogs() { return std::exchange(logs_, {}); }
  // The lines emitted since the last Take.
  std::vector<std::string> Take() {
    taken_ = std::exchange(commands_, {});
    return std::exchange(lines_, {});
  }
  // The commands behind the lines the last Take returned (for contents).
  const std::vector<WorkerCommand>& taken() const { return taken_; }

  // Hello, HelloAck, and the flush that the HelloAck scheduled.
  void Attach() {
    Feed(LinkUp{});
    Feed(FromServer{proto::HelloAck{3, "s1", Seconds(1), Seconds(10)}});
    Feed(FlushDue{});
  }
  void Assign(const AssignmentBuilder& a) { Feed(FromServer{proto::Assign{{a.Build()}}}); }
  void Started(uint32_t index, uint32_t attempt = 1, uint32_t watchdog_fences = 0) {
    Feed(TaskStarted{T(index), attempt, clock.Now(), watchdog_fences});
  }
  // Assigns and answers the StartTask as the shell does.
  void Run(const AssignmentBuilder& a) {
    Assign(a);
    Started(a.Build().task.index, a.Build().attempt);
  }
  void Exit(uint32_t index, uint32_t attempt = 1, int code = 0, uint32_t watchdog_fences = 0) {
    core::TaskOutcome outcome;
    outcome.exit_code = code;
    Feed(TaskExited{T(index), attempt, watchdog_fences});
    Feed(TaskReported{T(index), attempt, outcome});
  }
  void Server(proto::ServerMessage message) { Feed(FromServer{std::move(message)}); }

  WorkerState& state() { return *state_; }
  SimulatedClock clock;

 private:
  std::optional<WorkerState> state_;
  std::vector<std::string> lines_;
  std::vector<WorkerCommand> commands_;
  std::vector<WorkerCommand> taken_;
  std::vector<std::string> logs_;
};

TEST(WorkerStateTest, BeginsByArmingTheFenceAndTheReapersWatchdog) {
  SimulatedClock clock;
  WorkerStateConfig config;
  config.capacity.cores = {0};
  Result<WorkerState> state = WorkerState::Create(config, clock.Now());
  ASSERT_TRUE(state.ok());
  WorkerOutbox out;
  state->Handle(clock.Now(), AgentBegan{}, out);
  std::vector<std::string> lines;
  for (const WorkerCommand& c : out) lines.push_back(DescribeCommand(c, clock.Now()));
  // Budget 30 s - 2 * 2 s = 26 s; the reaper half a heartbeat later; the
  // watchdog ticks every heartbeat (below a quarter of the budget).
  EXPECT_THAT(lines, ElementsAre("arm fence +26001ms", "reaper deadline +27000ms",
                                 "arm watchdog +2000ms"));
}

TEST(WorkerStateTest, TimingTheFencingPolicyRefusesIsAnError) {
  WorkerStateConfig config;
  config.heartbeat_interval = Seconds(2);
  config.lease_ttl = Seconds(4);
  Result<WorkerState> state = WorkerState::Create(config, Time{});
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), StatusCode::kInvalidArgument);
}

TEST(WorkerStateTest, AttachSendsHelloThenArmsTheServersTiming) {
  TestWorker w;
  w.Feed(LinkUp{});
  EXPECT_THAT(w.Take(), ElementsAre("send hello"));
  w.Feed(FromServer{proto::HelloAck{3, "s1", Seconds(1), Seconds(10)}});
  EXPECT_THAT(w.Take(), ElementsAre("arm fence +8001ms", "reaper deadline +8500ms",
                                    "arm watchdog +1000ms", "schedule flush",
                                    "arm heartbeat +1000ms"));
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), IsEmpty());
  EXPECT_TRUE(w.state().established());
  EXPECT_EQ(w.state().worker_id(), 3u);
}

TEST(WorkerStateTest, AnAssignmentStartsAndIsReportedStartedInABatch) {
  TestWorker w;
  w.Attach();
  w.Take();
  w.Assign(AssignmentBuilder(0));
  EXPECT_THAT(w.Take(), ElementsAre("start 7.0#1"));
  w.Started(0);
  EXPECT_THAT(w.Take(), ElementsAre("schedule flush"));
  w.clock.Advance(Millis(5));
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("send started 7.0#1@-5ms"));
  w.Feed(HeartbeatDue{});
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat 7.0#1", "arm heartbeat +1000ms"));
}

TEST(WorkerStateTest, WhatDoesNotFitIsRefusedWithTheReason) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0).Core(1));
  w.Take();
  w.Assign(AssignmentBuilder(1).Core(1));
  std::vector<std::string> lines = w.Take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], ::testing::StartsWith("send refused 7.1#1: "));
  EXPECT_THAT(lines[0], ::testing::HasSubstr("core 1"));
}

// A task whose `disk` is more than the work directory has free, as the
// shell read it with the Assign (or the last heartbeat did), is refused:
// the server heard of more room than there is now.
TEST(WorkerStateTest, ATaskAskingMoreDiskThanIsFreeIsRefused) {
  TestWorker w;
  w.Attach();
  w.Take();
  w.Assign(AssignmentBuilder(0).Disk(20 * kGiB));  // nothing read yet: not judged
  EXPECT_THAT(w.Take(), ::testing::Contains(::testing::StartsWith("start 7.0#1")));
  w.Feed(FromServer{proto::Assign{{AssignmentBuilder(1).Disk(20 * kGiB).Build()}}, 5 * kGiB});
  EXPECT_EQ(w.Take(), std::vector<std::string>{
                          "send refused 7.1#1: disk: it asks 20 GiB for its directory, and the "
                          "work directory of w has 5 GiB free"});
  core::WorkerUtilization more;
  more.disk_free_bytes = 30 * kGiB;
  w.Feed(HeartbeatDue{more, std::nullopt});
  w.Take();
  w.Assign(AssignmentBuilder(2).Disk(20 * kGiB));
  EXPECT_THAT(w.Take(), ::testing::Contains(::testing::StartsWith("start 7.2#1")));
}

TEST(WorkerStateTest, AStartFailureIsReportedFinishedWithTheReasonAndFreesTheRoom) {
  TestWorker w;
  w.Attach();
  w.Take();
  w.Assign(AssignmentBuilder(0));
  w.Feed(TaskStartFailed{T(0), 1, "command not found: trian.py"});
  EXPECT_THAT(w.Take(), ElementsAre("start 7.0#1", "schedule flush"));
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("send finished 7.0#1 (command not found: trian.py)"));
  // Its core is free again.
  w.Assign(AssignmentBuilder(1).Core(0));
  EXPECT_THAT(w.Take(), ElementsAre("start 7.1#1"));
}

TEST(WorkerStateTest, AReSentAssignmentIsIgnoredAndARunningOneIsReportedAgain) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0));
  w.Feed(FlushDue{});
  w.Take();
  const Time started = w.clock.Now();
  w.clock.Advance(Seconds(3));
  // Running: said again, with its first started_at; nothing starts.
  w.Assign(AssignmentBuilder(0));
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("schedule flush", "send started 7.0#1@-3000ms"));
  (void)started;
  // Another attempt of a running task is refused.
  w.Assign(AssignmentBuilder(0).Attempt(2));
  EXPECT_THAT(w.Take(),
              ElementsAre("send refused 7.0#2: attempt 1 of this task is still running here"));
  // Ended but not yet acknowledged: ignored (its Finished is on the way).
  w.Exit(0);
  w.Take();
  w.Assign(AssignmentBuilder(0));
  EXPECT_THAT(w.Take(), IsEmpty());
}

TEST(WorkerStateTest, AckClearsUnacknowledgedResultsAndTheRestGoInTheNextHello) {
  TestWorker w;
  w.Attach();
  w.Take();
  w.Run(AssignmentBuilder(0));
  w.Run(AssignmentBuilder(1));
  w.Exit(0);
  w.Exit(1, 1, 3);
  w.Feed(FlushDue{});
  // Started and ended in one batch: reported started first.
  EXPECT_THAT(w.Take(), ElementsAre("start 7.0#1", "schedule flush", "start 7.1#1",
                                    "send started 7.0#1@+0ms 7.1#1@+0ms",
                                    "send finished 7.0#1 7.1#1"));
  EXPECT_EQ(w.state().unacked(), 2u);
  w.Server(proto::Ack{{proto::TaskAttempt{T(0), 1}}});
  EXPECT_EQ(w.state().unacked(), 1u);
  w.Feed(LinkDown{});
  w.Feed(LinkUp{});
  EXPECT_THAT(w.Take(), ElementsAre("cancel heartbeat", "send hello finished 7.1#1"));
  w.Server(proto::Ack{{proto::TaskAttempt{T(1), 1}}});
  w.Feed(LinkDown{});
  w.Feed(LinkUp{});
  EXPECT_THAT(w.Take(), ElementsAre("cancel heartbeat", "send hello"));
}

TEST(WorkerStateTest, AResultThatEndsWhileDetachedWaitsForTheHello) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0));
  w.Feed(FlushDue{});
  w.Feed(LinkDown{});
  w.Take();
  w.Exit(0);
  EXPECT_THAT(w.Take(), IsEmpty());  // nothing to send it on
  w.Feed(LinkUp{});
  EXPECT_THAT(w.Take(), ElementsAre("send hello finished 7.0#1"));
  // Not sent twice on this session after the HelloAck.
  w.Feed(FromServer{proto::HelloAck{3, "s1", Seconds(1), Seconds(10)}});
  w.Feed(FlushDue{});
  for (const std::string& line : w.Take()) EXPECT_THAT(line, ::testing::Not(::testing::HasSubstr("finished")));
}

TEST(WorkerStateTest, HelloAfterReconnectListsRunningQueuedAndUnacknowledged) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0).Core(0));
  w.Assign(AssignmentBuilder(1).Core(0).After(0));
  w.Run(AssignmentBuilder(2).Core(2));
  w.Exit(2);
  w.Feed(LinkDown{});
  w.Take();
  w.Feed(LinkUp{});
  EXPECT_THAT(w.Take(),
              ElementsAre("send hello running 7.0#1 queued 7.1#1 finished 7.2#1"));
  const auto& hello = std::get<proto::Hello>(std::get<SendMessage>(w.taken().at(0)).message);
  // A restarted server adopts the attempts with the resources assigned.
  EXPECT_EQ(hello.running.at(0).cores, std::vector<uint32_t>{0});
  EXPECT_EQ(hello.previous_id, 3u);
  EXPECT_EQ(hello.worker_name, "w");
  EXPECT_EQ(hello.key, "key");
  EXPECT_EQ(w.Take(), std::vector<std::string>{});
}

TEST(WorkerStateTest, AQueuedTaskStartsOnItsPredecessorsExitBeforeTheFinishedReport) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0).Core(0).Mem(8 * kGiB));
  w.Feed(FlushDue{});
  w.Take();
  // Same core and memory as its predecessor: prepared, not started.
  w.Assign(AssignmentBuilder(1).Core(0).Mem(8 * kGiB).After(0));
  EXPECT_THAT(w.Take(), ElementsAre("prepare 7.1#1"));
  w.Feed(HeartbeatDue{});
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat 7.0#1", "arm heartbeat +1000ms"));
  // Sent again after a re-attach: stays queued as it is.
  w.Assign(AssignmentBuilder(1).Core(0).Mem(8 * kGiB).After(0));
  EXPECT_THAT(w.Take(), IsEmpty());
  // A second successor behind the same attempt is refused.
  w.Assign(AssignmentBuilder(2).Core(0).After(0));
  EXPECT_THAT(w.Take(), ElementsAre("send refused 7.2#1: a task is already queued behind 7.0#1 "
                                    "(7.1)"));
  w.clock.Advance(Seconds(1));
  w.Exit(0);
  // The start comes first, on the room just freed; the report follows.
  EXPECT_THAT(w.Take(), ElementsAre("start prepared 7.1#1", "schedule flush"));
  w.clock.Advance(Micros(300));
  w.Started(1);
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("send finished 7.0#1", "send started 7.1#1@+0ms"));
  EXPECT_EQ(w.state().RunningAttempt(T(1)), 1u);
  EXPECT_EQ(w.state().queued(), 0u);
}

// The exit and what the task left are two events, so that the successor's
// start does not wait for the outcome's copy and the report's bookkeeping:
// nothing is reported between them, and the report is dated by the exit.
TEST(WorkerStateTest, AnExitFreesTheRoomAtOnceAndItsReportIsDatedByTheExit) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0).Core(0).Mem(8 * kGiB));
  w.Feed(FlushDue{});
  w.Assign(AssignmentBuilder(1).Core(0).Mem(8 * kGiB).After(0));
  w.Take();
  w.clock.Advance(Seconds(1));
  const Time exited_at = w.clock.Now();
  w.Feed(TaskExited{T(0), 1, 0});
  EXPECT_THAT(w.Take(), ElementsAre("start prepared 7.1#1"));
  EXPECT_EQ(w.state().unacked(), 0u);
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), IsEmpty());
  w.clock.Advance(Millis(5));
  core::TaskOutcome outcome;
  outcome.exit_code = 4;
  outcome.result = "text";
  w.Feed(TaskReported{T(0), 1, outcome});
  EXPECT_THAT(w.Take(), ElementsAre("schedule flush"));
  EXPECT_EQ(w.state().unacked(), 1u);
  w.Feed(FlushDue{});
  ASSERT_THAT(w.Take(), ElementsAre("send finished 7.0#1"));
  const auto& finished = std::get<proto::Finished>(std::get<SendMessage>(w.taken().at(0)).message);
  ASSERT_EQ(finished.tasks.size(), 1u);
  EXPECT_EQ(finished.tasks[0].finished_at, exited_at);
  EXPECT_EQ(finished.tasks[0].outcome.exit_code, 4);
  EXPECT_EQ(finished.tasks[0].outcome.result, "text");
  // A report whose exit never came (a shell's slip) is still recorded, as
  // of its own time.
  w.Feed(TaskReported{T(5), 1, outcome});
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("schedule flush", "send finished 7.5#1"));
  EXPECT_EQ(std::get<proto::Finished>(std::get<SendMessage>(w.taken().at(1)).message)
                .tasks.at(0)
                .finished_at,
            w.clock.Now());
}

// The server sends a start and its queue-ahead successor in one Assign:
// the successor waits behind the attempt just started, not refused.
TEST(WorkerStateTest, ASuccessorInTheSameAssignAsItsPredecessorIsQueued) {
  TestWorker w;
  w.Attach();
  w.Take();
  w.Feed(FromServer{proto::Assign{{AssignmentBuilder(0).Core(0).Build(),
                                   AssignmentBuilder(1).Core(0).After(0).Build()}}});
  EXPECT_THAT(w.Take(), ElementsAre("start 7.0#1", "prepare 7.1#1"));
  w.Started(0);
  EXPECT_THAT(w.Take(), ElementsAre("schedule flush"));
  EXPECT_EQ(w.state().queued(), 1u);
}

TEST(WorkerStateTest, AfterAnAttemptNotRunningHereStartsAtOnce) {
  TestWorker w;
  w.Attach();
  w.Take();
  w.Assign(AssignmentBuilder(1).After(0));
  EXPECT_THAT(w.Take(), ElementsAre("start 7.1#1"));
}

TEST(WorkerStateTest, AQueuedTaskThatCannotBePreparedIsReportedFinished) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0));
  w.Feed(FlushDue{});
  w.Take();
  w.Assign(AssignmentBuilder(1).After(0));
  w.Feed(TaskPrepareFailed{T(1), 1, "command not found: nope"});
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("prepare 7.1#1", "schedule flush",
                                    "send finished 7.1#1 (command not found: nope)"));
  EXPECT_EQ(w.state().queued(), 0u);
  w.Exit(0);
  EXPECT_THAT(w.Take(), ElementsAre("schedule flush"));  // nothing starts
}

TEST(WorkerStateTest, ACanceledQueuedTaskNeverStartsAndIsReportedNeverStarted) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0));
  w.Assign(AssignmentBuilder(1).After(0));
  w.Feed(FlushDue{});
  w.Take();
  w.Server(proto::Cancel{T(1), 1, "canceled by user"});
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(),
              ElementsAre("discard 7.1#1", "schedule flush",
                          "send finished 7.1#1 (never started) (canceled before it started: "
                          "canceled by user)"));
  w.Exit(0);
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("schedule flush", "send finished 7.0#1"));
  // Cancel of a running one kills it with the grace; Kill at once.
  w.Run(AssignmentBuilder(2));
  w.Run(AssignmentBuilder(3));
  w.Take();
  w.Server(proto::Cancel{T(2), 1, "canceled by user"});
  w.Server(proto::Kill{T(3), 1, "lease lost"});
  w.Server(proto::Kill{T(3), 2, "stale attempt"});
  EXPECT_THAT(w.Take(), ElementsAre("kill 7.2#1 grace 10000ms", "kill 7.3#1 grace 0ms"));
}

// An attempt whose inputs the shell fetches is this worker's: a kill that
// comes meanwhile drops it, reported never started, and the fetch's end
// then starts nothing. Before, the kill found it neither queued nor running
// and was ignored, and the task ran to its end after the server had counted
// the attempt lost and run it again elsewhere.
TEST(WorkerStateTest, AKillDuringTheInputFetchDropsTheAttemptAndItNeverStarts) {
  TestWorker w;
  w.Attach();
  w.Take();
  const proto::Assignment held = AssignmentBuilder(0).Build();
  w.Feed(InputsFetching{held.task, held.attempt});
  EXPECT_THAT(w.Take(), IsEmpty());
  w.Server(proto::Kill{T(0), 1, "lease expired"});
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("schedule flush",
                                    "send finished 7.0#1 (never started) (canceled before it "
                                    "started: lease expired)"));
  w.Feed(InputsFetched{held, ""});
  EXPECT_THAT(w.Take(), IsEmpty());
  EXPECT_THAT(w.TakeLogs(), Contains(HasSubstr("7.0#1 was stopped while its inputs were fetched")));
  // A withdrawal too; and a fetch that ends first starts it as usual, or
  // refuses it with the fetch's error.
  const proto::Assignment second = AssignmentBuilder(1).Build();
  w.Feed(InputsFetching{second.task, second.attempt});
  w.Server(proto::Withdraw{T(1), 1, "room freed first on worker 2"});
  w.Feed(InputsFetched{second, ""});
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("schedule flush",
                                    "send finished 7.1#1 (never started) (withdrawn before it "
                                    "started: room freed first on worker 2)"));
  const proto::Assignment third = AssignmentBuilder(2).Build();
  w.Feed(InputsFetching{third.task, third.attempt});
  w.Feed(InputsFetched{third, ""});
  EXPECT_THAT(w.Take(), ElementsAre("start 7.2#1"));
  const proto::Assignment fourth = AssignmentBuilder(3).Build();
  w.Feed(InputsFetching{fourth.task, fourth.attempt});
  w.Feed(InputsFetched{fourth, "fetch failed: no holder answered"});
  EXPECT_THAT(w.Take(), ElementsAre("send refused 7.3#1: fetch failed: no holder answered"));
  // Inputs whose holders sent other bytes go with the refusal.
  const proto::Assignment fifth = AssignmentBuilder(4).Build();
  w.Feed(InputsFetching{fifth.task, fifth.attempt});
  w.Feed(InputsFetched{fifth, "sha256 mismatch", {{T(0), 3}}});
  EXPECT_EQ(w.Take().size(), 1u);
  ASSERT_EQ(w.taken().size(), 1u);
  const auto& refused = std::get<proto::Refused>(std::get<SendMessage>(w.taken()[0]).message);
  EXPECT_EQ(refused.corrupt, (std::vector<proto::CorruptInput>{{T(0), 3}}));
}

TEST(WorkerStateTest, AWithdrawnQueuedTaskNeverStartsAndAStartedOneIgnoresIt) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0));
  w.Assign(AssignmentBuilder(1).After(0));
  w.Feed(FlushDue{});
  w.Take();
  w.Server(proto::Withdraw{T(1), 1, "room freed first on worker 2"});
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("discard 7.1#1", "schedule flush",
                                    "send finished 7.1#1 (never started) (withdrawn before it "
                                    "started: room freed first on worker 2)"));
  w.Server(proto::Withdraw{T(0), 1, "too late"});
  EXPECT_THAT(w.Take(), IsEmpty());
  EXPECT_EQ(w.state().RunningAttempt(T(0)), 1u);
}

TEST(WorkerStateTest, FencingDropsTheQueueFirstThenKillsAndReportsOnReturn) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0).Core(0));
  w.Assign(AssignmentBuilder(1).Core(0).After(0));
  w.Run(AssignmentBuilder(2).Core(2));
  w.Feed(FlushDue{});
  w.Take();
  // The link drops; it was alive until two heartbeats before that.
  w.clock.Advance(Seconds(3));
  w.Feed(LinkDown{});
  EXPECT_THAT(w.Take(), ElementsAre("cancel heartbeat"));
  // Before the budget (8 s from the contact 1 s ago): nothing but a re-arm.
  w.clock.Advance(Seconds(6));
  w.Feed(FenceDue{});
  EXPECT_THAT(w.Take(), ElementsAre("arm fence +1ms"));
  w.clock.Advance(Millis(1));
  w.Feed(FenceDue{});
  EXPECT_THAT(w.Take(), ElementsAre("discard 7.1#1", "fence-kill 7.0#1 grace 0ms",
                                    "fence-kill 7.2#1 grace 0ms"));
  EXPECT_THAT(w.TakeLogs(),
              testing::IsSupersetOf(
                  {"log error: fenced: no contact with the server for 8 s; dropping 1 queued "
                   "tasks",
                   "log error: fenced: no contact with the server for 8 s; killing 2 running "
                   "tasks (their leases are about to expire)"}));
  // Fenced attempts are no longer reported running.
  w.Feed(LinkUp{});
  EXPECT_THAT(w.Take(), ElementsAre("send hello finished 7.1#1 (never started) (fenced: no "
                                    "contact with the server for 8 s)"));
  w.Feed(LinkDown{});
  w.Take();
  // The predecessor's exit does not start anything; each is reported with
  // the fence reason once the link is back.
  w.Exit(0, 1, 0);
  w.Exit(2, 1, 0);
  EXPECT_THAT(w.Take(), IsEmpty());
  w.Feed(LinkUp{});
  EXPECT_THAT(
      w.Take(),
      ElementsAre("send hello finished 7.0#1 (fenced: no contact with the server for 8 s) "
                  "finished 7.1#1 (never started) (fenced: no contact with the server for 8 s) "
                  "finished 7.2#1 (fenced: no contact with the server for 8 s)"));
  const auto& hello = std::get<proto::Hello>(std::get<SendMessage>(w.taken().at(0)).message);
  EXPECT_TRUE(hello.finished.at(1).never_started);
  // Another fence check finds nothing to kill and arms nothing.
  w.Feed(FenceDue{});
  EXPECT_THAT(w.Take(), IsEmpty());
}

TEST(WorkerStateTest, AnOpenAnsweredLinkIsContactAndDoesNotFence) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0));
  w.Take();
  w.clock.Advance(Seconds(60));
  w.Feed(FenceDue{});
  EXPECT_THAT(w.Take(), ElementsAre("arm fence +8001ms"));
}

TEST(WorkerStateTest, ATaskTheReapersWatchdogKilledIsReportedFenced) {
  TestWorker w;
  w.Attach();
  w.Assign(AssignmentBuilder(0));
  w.Started(0, 1, /*watchdog_fences=*/4);
  w.Feed(FlushDue{});
  w.Take();
  w.Exit(0, 1, 0, /*watchdog_fences=*/5);
  w.Feed(FlushDue{});
  std::vector<std::string> lines = w.Take();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[1], ::testing::HasSubstr("finished 7.0#1 (fenced: the worker was stopped"));
}

TEST(WorkerStateTest, ALateWatchdogTickDoesNotRenewTheReapersDeadline) {
  TestWorker w;
  w.Attach();
  w.Take();
  w.clock.Advance(Seconds(1));
  w.Feed(WatchdogDue{});
  EXPECT_THAT(w.Take(), ElementsAre("reaper deadline +8500ms", "arm watchdog +1000ms"));
  // Stopped for 5 s (more than half the budget): proves nothing.
  w.clock.Advance(Seconds(5));
  w.Feed(WatchdogDue{});
  EXPECT_THAT(w.Take(), ElementsAre("arm watchdog +1000ms"));
}

TEST(WorkerStateTest, InABatchFinishedGoesBeforeStartedUnlessTheSameAttemptStartedInIt) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0));
  w.Feed(FlushDue{});
  w.Take();
  w.Run(AssignmentBuilder(1));
  w.Exit(0);
  w.Exit(1);
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("start 7.1#1", "schedule flush", "send finished 7.0#1",
                                    "send started 7.1#1@+0ms", "send finished 7.1#1"));
}

// --idle-timeout: idle is judged at heartbeats; nothing running, queued or
// unacknowledged for the timeout sends a Drain, and a heartbeat later,
// still idle, Leave.
TEST(WorkerStateTest, AnIdleWorkerDrainsThenLeavesAHeartbeatLater) {
  TestWorker w(Seconds(5));
  w.Attach();
  w.Take();
  w.TakeLogs();
  w.Feed(HeartbeatDue{});  // idle from here
  w.clock.Advance(Seconds(3));
  // A task: busy until its result is acknowledged.
  w.Run(AssignmentBuilder(0));
  w.Exit(0);
  w.Feed(FlushDue{});
  w.Take();
  w.clock.Advance(Seconds(3));
  w.Feed(HeartbeatDue{});
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat", "arm heartbeat +1000ms"));
  w.Server(proto::Ack{{proto::TaskAttempt{T(0), 1}}});
  w.Feed(HeartbeatDue{});  // idle again from here (6 s)
  w.clock.Advance(Seconds(4));
  w.Feed(HeartbeatDue{});
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat", "arm heartbeat +1000ms", "send heartbeat",
                                    "arm heartbeat +1000ms"));
  w.clock.Advance(Seconds(1));
  w.Feed(HeartbeatDue{});
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat", "send drain", "arm heartbeat +1000ms"));
  EXPECT_THAT(w.TakeLogs(),
              ElementsAre("log info: idle for 5s (--idle-timeout 5s): drained, leaving at the "
                          "next heartbeat"));
  w.clock.Advance(Seconds(1));
  w.Feed(HeartbeatDue{});
  EXPECT_THAT(w.Take(),
              ElementsAre("send heartbeat", "leave: idle for 6s", "arm heartbeat +1000ms"));
}

TEST(WorkerStateTest, ATaskAssignedBeforeTheDrainRunsBeforeTheWorkerLeaves) {
  TestWorker w(Seconds(2));
  w.Attach();
  w.Take();
  w.Feed(HeartbeatDue{});
  w.clock.Advance(Seconds(2));
  w.Feed(HeartbeatDue{});
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat", "arm heartbeat +1000ms", "send heartbeat",
                                    "send drain", "arm heartbeat +1000ms"));
  // The server sent this before it saw the Drain.
  w.Run(AssignmentBuilder(0));
  w.clock.Advance(Seconds(1));
  w.Feed(HeartbeatDue{});
  w.Exit(0);
  w.Feed(FlushDue{});
  w.Server(proto::Ack{{proto::TaskAttempt{T(0), 1}}});
  w.Take();
  // Idle again: judged from the next heartbeat, it leaves the one after
  // (the Drain went out already).
  w.Feed(HeartbeatDue{});
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat", "arm heartbeat +1000ms"));
  w.clock.Advance(Seconds(1));
  w.Feed(HeartbeatDue{});
  EXPECT_THAT(w.Take(),
              ElementsAre("send heartbeat", "leave: idle for 1s", "arm heartbeat +1000ms"));
}

// ---- idle-desktop mode ------------------------------------------------------

WorkerStateConfig::Desktop Desktop() {
  WorkerStateConfig::Desktop d;
  d.enabled = true;
  d.idle_after = Seconds(10);
  d.resume_after = Seconds(2);
  d.suspend_for = Seconds(60);
  d.max_outside_load = 0.3;
  return d;
}

// The owner's input `ago` before now, as the idle detector reports it.
OwnerSample Input(const SimulatedClock& clock, Duration ago = Duration::zero()) {
  return OwnerSample{clock.Now() - ago, 0};
}

// A desktop worker, attached, whose owner has been away for idle_after.
TestWorker AwayDesktop() {
  TestWorker w(Duration::zero(), Desktop());
  w.Attach();
  w.clock.Advance(Seconds(10));
  w.Feed(OwnerSample{});
  w.Take();
  return w;
}

TEST(WorkerStateDesktopTest, OffersWorkOnlyAfterIdleAfterWithoutInputAndSaysSo) {
  TestWorker w(Duration::zero(), Desktop());
  w.Attach();
  // Present from the start (no input seen counts from the start).
  EXPECT_THAT(w.Take(), ::testing::Contains("send owner present"));
  EXPECT_TRUE(w.state().owner_present());
  w.clock.Advance(Seconds(4));
  w.Feed(Input(w.clock));  // input at 4 s: the quiet time starts again
  w.clock.Advance(Seconds(9));
  w.Feed(OwnerSample{w.clock.Now() - Seconds(9), 0});
  EXPECT_THAT(w.Take(), IsEmpty());
  w.clock.Advance(Seconds(1));
  w.Feed(OwnerSample{w.clock.Now() - Seconds(10), 0});
  EXPECT_THAT(w.Take(), ElementsAre("send owner away"));
  EXPECT_FALSE(w.state().owner_present());
  const auto* owner = std::get_if<SendOwner>(&w.taken()[0]);
  ASSERT_NE(owner, nullptr);
  EXPECT_EQ(owner->owner.since, w.clock.Now());
  EXPECT_EQ(owner->owner.note, "owner away");
  // A new session is told again.
  w.Feed(LinkDown{});
  w.Attach();
  EXPECT_THAT(w.Take(), ::testing::Contains("send owner away"));
}

TEST(WorkerStateDesktopTest, TheOwnersInputSuspendsEveryTaskAtOnceAndQuietResumesThem) {
  TestWorker w = AwayDesktop();
  w.Run(AssignmentBuilder(0));
  w.Run(AssignmentBuilder(1));
  w.Take();
  w.clock.Advance(Millis(100));
  w.Feed(Input(w.clock, Millis(3)));
  EXPECT_THAT(w.Take(), ElementsAre("suspend 7.0#1", "suspend 7.1#1",
                                    "send owner present (freeze since input -3ms)"));
  const auto* owner = std::get_if<SendOwner>(&w.taken()[2]);
  ASSERT_NE(owner, nullptr);
  EXPECT_EQ(owner->owner.note, "owner present; offers work after 10s idle");
  // Nothing new is taken while the owner is there.
  w.Assign(AssignmentBuilder(2).Core(2));
  EXPECT_THAT(w.Take(), ElementsAre("send refused 7.2#1: its owner is at w"));
  // Quiet for resume_after: the tasks go on, nothing new is offered yet.
  w.clock.Advance(Seconds(1));
  w.Feed(OwnerSample{w.clock.Now() - Seconds(1), 0});
  EXPECT_THAT(w.Take(), IsEmpty());
  w.clock.Advance(Seconds(1));
  w.Feed(OwnerSample{w.clock.Now() - Seconds(2), 0});
  EXPECT_THAT(w.Take(), ElementsAre("resume 7.0#1", "resume 7.1#1"));
  EXPECT_TRUE(w.state().owner_present());
  // Another input suspends them again, and says how fast.
  w.clock.Advance(Seconds(1));
  w.Feed(Input(w.clock, Millis(1)));
  EXPECT_THAT(w.Take(), ElementsAre("suspend 7.0#1", "suspend 7.1#1",
                                    "send owner present (freeze since input -1ms)"));
  // Quiet for idle_after: resumed, then offering again.
  w.clock.Advance(Seconds(2));
  w.Feed(OwnerSample{w.clock.Now() - Seconds(2), 0});
  EXPECT_THAT(w.Take(), ElementsAre("resume 7.0#1", "resume 7.1#1"));
  w.clock.Advance(Seconds(8));
  w.Feed(OwnerSample{w.clock.Now() - Seconds(10), 0});
  EXPECT_THAT(w.Take(), ElementsAre("send owner away"));
  w.Assign(AssignmentBuilder(2).Core(2));
  EXPECT_THAT(w.Take(), ElementsAre("start 7.2#1"));
}

TEST(WorkerStateDesktopTest, AnOwnerWhoStaysGetsTheMachineBackTasksVacatedNotFailed) {
  TestWorker w = AwayDesktop();
  w.Run(AssignmentBuilder(0).Vacate(10, Seconds(5)));  // SIGUSR1
  w.Feed(FlushDue{});
  w.Take();
  w.Feed(Input(w.clock));
  EXPECT_THAT(w.Take(),
              ElementsAre("suspend 7.0#1", "send owner present (freeze since input +0ms)"));
  // The owner keeps typing: suspended for suspend_for, then vacated.
  for (int s = 1; s < 60; ++s) {
    w.clock.Advance(Seconds(1));
    w.Feed(Input(w.clock));
  }
  EXPECT_THAT(w.Take(), IsEmpty());
  w.clock.Advance(Seconds(1));
  w.Feed(Input(w.clock));
  EXPECT_THAT(w.Take(), ElementsAre("kill 7.0#1 signal 10 grace 5000ms"));
  EXPECT_THAT(w.TakeLogs(),
              ::testing::Contains(::testing::HasSubstr("vacating 7.0#1: preempted: owner "
                                                       "returned on w (signal 10")));
  // Its end is reported vacated, with the reason, whatever its exit status.
  w.Exit(0, 1, 143);
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("schedule flush",
                                    "send finished 7.0#1 (preempted: owner returned on w)"));
  const auto* sent = std::get_if<SendMessage>(&w.taken()[1]);
  ASSERT_NE(sent, nullptr);
  const auto& finished = std::get<proto::Finished>(sent->message);
  ASSERT_EQ(finished.tasks.size(), 1u);
  EXPECT_TRUE(finished.tasks[0].vacated);
  EXPECT_EQ(finished.tasks[0].outcome.exit_code, 143);
}

TEST(WorkerStateDesktopTest, LoadFromOtherProgramsCountsAsTheOwnerBeingThere) {
  TestWorker w = AwayDesktop();
  w.Run(AssignmentBuilder(0));
  w.Take();
  w.Feed(OwnerSample{std::nullopt, 0.25});  // below 0.3 cores
  EXPECT_THAT(w.Take(), IsEmpty());
  w.Feed(OwnerSample{std::nullopt, 1.5});
  // No input to measure the freeze from.
  EXPECT_THAT(w.Take(), ElementsAre("suspend 7.0#1", "send owner present"));
  w.clock.Advance(Seconds(2));
  w.Feed(OwnerSample{std::nullopt, 0.1});
  EXPECT_THAT(w.Take(), ElementsAre("resume 7.0#1"));
}

TEST(WorkerStateDesktopTest, AQueuedSuccessorGoesBackWhenTheOwnerComes) {
  TestWorker w = AwayDesktop();
  w.Run(AssignmentBuilder(0));
  w.Assign(AssignmentBuilder(1).Core(0).After(0));
  w.Feed(FlushDue{});
  w.Take();
  w.Feed(Input(w.clock));
  EXPECT_THAT(w.Take(), ElementsAre("discard 7.1#1", "schedule flush", "suspend 7.0#1",
                                    "send owner present (freeze since input +0ms)"));
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("send finished 7.1#1 (never started) (dropped before it "
                                    "started: its owner is at w)"));
}

TEST(WorkerStateDesktopTest, AServerPreemptionVacatesTheTaskItsWayAndReportsItVacated) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0).Vacate(12, Seconds(20)));  // SIGUSR2
  w.Feed(FlushDue{});
  w.Take();
  proto::Cancel cancel{T(0), 1, "preempted by 9.0 (priority 90)"};
  cancel.vacate = true;
  w.Server(cancel);
  EXPECT_THAT(w.Take(), ElementsAre("kill 7.0#1 signal 12 grace 20000ms"));
  w.Exit(0, 1, 0);
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("schedule flush",
                                    "send finished 7.0#1 (preempted by 9.0 (priority 90))"));
  const auto& finished = std::get<proto::Finished>(std::get<SendMessage>(w.taken()[1]).message);
  EXPECT_TRUE(finished.tasks[0].vacated);
  // A plain cancel is not a vacate.
  w.Run(AssignmentBuilder(1).Vacate(12, Seconds(20)));
  w.Take();
  w.Server(proto::Cancel{T(1), 1, "canceled by user"});
  EXPECT_THAT(w.Take(), ElementsAre("kill 7.1#1 grace 10000ms"));
}

TEST(WorkerStateDesktopTest, WithoutAMemoryThresholdLowMemoryChangesNothing) {
  TestWorker w;
  w.Attach();
  w.Run(AssignmentBuilder(0));
  w.clock.Advance(Seconds(1));
  w.Run(AssignmentBuilder(1));  // the youngest
  w.Feed(FlushDue{});
  w.Take();
  HeartbeatDue low;
  low.available_bytes = kGiB;
  w.Feed(low);
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat 7.0#1 7.1#1", "arm heartbeat +1000ms"));
}

TEST(WorkerStateDesktopTest, MemoryPressureSuspendsThenVacatesYoungestFirstAndResumesOnRecovery) {
  TestWorker w(Duration::zero(), {}, 2 * kGiB);
  w.Attach();
  w.Run(AssignmentBuilder(0));
  w.clock.Advance(Seconds(1));
  w.Run(AssignmentBuilder(1));  // the youngest
  w.clock.Advance(Seconds(1));
  w.Run(AssignmentBuilder(2).Core(2));
  w.Feed(FlushDue{});
  w.Take();
  HeartbeatDue low;
  low.available_bytes = kGiB;
  HeartbeatDue fine;
  fine.available_bytes = 3 * kGiB;
  w.Feed(low);
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat 7.0#1 7.1#1 7.2#1", "suspend 7.2#1",
                                    "arm heartbeat +1000ms"));
  // Nothing new meanwhile.
  w.Assign(AssignmentBuilder(3).Core(3));
  EXPECT_THAT(w.Take(),
              ElementsAre("send refused 7.3#1: memory is low on w (below 2 GiB available)"));
  // Still low: that one is vacated, and the next youngest suspended later.
  w.Feed(low);
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat 7.0#1 7.1#1 7.2#1",
                                    "kill 7.2#1 grace 30000ms", "arm heartbeat +1000ms"));
  w.Exit(2, 1, 143);
  w.Feed(FlushDue{});
  EXPECT_THAT(w.Take(), ElementsAre("schedule flush",
                                    "send finished 7.2#1 (preempted: memory low on w (1 GiB "
                                    "available, below 2 GiB))"));
  w.Feed(low);
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat 7.0#1 7.1#1", "suspend 7.1#1",
                                    "arm heartbeat +1000ms"));
  // Recovered: it goes on, and work is taken again.
  w.Feed(fine);
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat 7.0#1 7.1#1", "resume 7.1#1",
                                    "arm heartbeat +1000ms"));
  w.Assign(AssignmentBuilder(3).Core(3));
  EXPECT_THAT(w.Take(), ElementsAre("start 7.3#1"));
}

}  // namespace
}  // namespace drover::worker

namespace drover::worker {
namespace {

// Health checks that fail: said in the log and to the server at once (a
// heartbeat), in every heartbeat after, and again right after a re-attach;
// an assignment that crossed it is refused; running tasks go on; well
// again, said once.
TEST(WorkerStateHealthTest, AnUnhealthyWorkerSaysSoAndRefusesNewWork) {
  TestWorker w;
  w.Feed(HealthChecked{"/scratch not mounted"});  // before the link: nothing is sent
  EXPECT_THAT(w.Take(), ::testing::IsEmpty());
  EXPECT_THAT(w.TakeLogs(), ElementsAre(HasSubstr("unhealthy: /scratch not mounted; taking no new "
                                                  "work, running tasks go on")));
  w.Attach();
  EXPECT_THAT(w.Take(), ::testing::Contains("send heartbeat unhealthy: /scratch not mounted"));
  w.Assign(AssignmentBuilder(0));
  EXPECT_THAT(w.Take(), ElementsAre("send refused 7.0#1: w is unhealthy: /scratch not mounted"));
  w.Feed(HealthChecked{"/scratch not mounted"});  // the same: nothing new
  EXPECT_THAT(w.Take(), ::testing::IsEmpty());
  w.Feed(HeartbeatDue{});
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat unhealthy: /scratch not mounted",
                                    "arm heartbeat +1000ms"));
  w.Feed(HealthChecked{""});
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat"));
  EXPECT_THAT(w.TakeLogs(), Contains(HasSubstr("healthy again: taking work")));
  w.Run(AssignmentBuilder(1));
  w.Feed(HeartbeatDue{});
  EXPECT_THAT(w.Take(), ::testing::Contains("send heartbeat 7.1#1"));
}

// A sick GPU: logged, in the heartbeats, an assignment on it refused; well
// again, said once.
TEST(WorkerStateHealthTest, ASickGpuIsSaidAndNothingNewRunsOnIt) {
  TestWorker w;
  w.Attach();
  w.Take();
  w.TakeLogs();
  w.Feed(HealthChecked{"", {{1, "Xid 79 (critical)"}}});
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat sick GPU 1: Xid 79 (critical)"));
  EXPECT_THAT(w.TakeLogs(), ElementsAre(HasSubstr("GPU 1 is sick: Xid 79 (critical); out of the offer")));
  w.Assign(AssignmentBuilder(0).Gpu(1));
  EXPECT_THAT(w.Take(), ElementsAre("send refused 7.0#1: GPU 1 of w is sick: Xid 79 (critical)"));
  w.TakeLogs();
  w.Feed(HealthChecked{"", {}});
  EXPECT_THAT(w.Take(), ElementsAre("send heartbeat"));
  EXPECT_THAT(w.TakeLogs(), ElementsAre(HasSubstr("GPU 1 is well again")));
}

}  // namespace
}  // namespace drover::worker
