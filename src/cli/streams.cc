#include "cli/streams.h"

#include <chrono>
#include <memory>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "net/backoff.h"
#include "net/event_loop.h"
#include "net/ws_client.h"

namespace drover::cli {

namespace {

// Errors that a retry cannot fix.
bool Permanent(const Status& s) {
  return s.code() == StatusCode::kUnauthenticated || s.code() == StatusCode::kFailedPrecondition ||
         s.code() == StatusCode::kNotFound || s.code() == StatusCode::kPermissionDenied ||
         s.code() == StatusCode::kInvalidArgument;
}

Time SteadyNow() {
  return Time(std::chrono::duration_cast<Duration>(
      std::chrono::steady_clock::now().time_since_epoch()));
}

// Connects, feeds events to the watch and reconnects until done or out of
// time. Everything runs on the loop thread.
class JobFollower {
 public:
  JobFollower(net::EventLoop& loop, const net::ClientOptions& options, JobId job, JobWatch& watch,
              const JobChangeFn& on_change, Duration reconnect_for)
      : loop_(loop),
        options_(options),
        target_("/api/v1/events?job=" + std::to_string(job)),
        watch_(watch),
        on_change_(on_change),
        reconnect_for_(reconnect_for),
        retry_(loop),
        backoff_(net::BackoffOptions{Millis(200), Seconds(5), 2.0, 0.5},
                 [rng = std::make_shared<std::mt19937>(std::random_device{}())] {
                   return std::uniform_real_distribution<double>(0.0, 1.0)(*rng);
                 }) {}

  void Connect() {
    net::ConnectWebSocket(loop_, options_, target_,
                          [this](Result<std::shared_ptr<net::WsSession>> session) {
                            if (!session.ok()) return Lost(session.status());
                            OnOpen(std::move(*session));
                          });
  }

  const Status& result() const { return result_; }

 private:
  void OnOpen(std::shared_ptr<net::WsSession> session) {
    session_ = session;
    offline_since_.reset();
    backoff_.Reset();
    session->OnText([this](std::string text) {
      Result<TaskEventView> event = DecodeTaskEventView(text);
      if (!event.ok()) return;  // other message types, or noise: not ours to judge
      if (watch_.Apply(*event) && on_change_) on_change_(*event, watch_);
      if (watch_.done()) Finish(Status::Ok());
    });
    session->OnClose([this](const Status& s) {
      session_.reset();
      if (finished_) return;
      Lost(s.ok() ? Unavailable("the server closed the event stream") : s);
    });
    // A job already over has been fully described by the snapshot; an empty
    // job (no tasks) is done before any event.
    if (watch_.done()) Finish(Status::Ok());
  }

  void Lost(const Status& why) {
    if (finished_) return;
    if (Permanent(why)) return Finish(why);
    const Time now = SteadyNow();
    if (!offline_since_) offline_since_ = now;
    if (now - *offline_since_ >= reconnect_for_) {
      return Finish(why.WithContext("event stream lost for " +
                                    std::to_string(reconnect_for_.count() / 1000000) + "s"));
    }
    retry_.ArmAfter(backoff_.Next(), [this] { Connect(); });
  }

  void Finish(Status s) {
    if (finished_) return;
    finished_ = true;
    result_ = std::move(s);
    retry_.Cancel();
    if (session_) session_->Close("done");
    loop_.Stop();
  }

  net::EventLoop& loop_;
  const net::ClientOptions& options_;
  std::string target_;
  JobWatch& watch_;
  const JobChangeFn& on_change_;
  Duration reconnect_for_;
  net::Timer retry_;
  net::Backoff backoff_;
  std::optional<Time> offline_since_;
  std::shared_ptr<net::WsSession> session_;
  bool finished_ = false;
  Status result_;
};

}  // namespace

Status FollowJob(const net::ClientOptions& options, JobId job, JobWatch& watch,
                 const JobChangeFn& on_change, Duration reconnect_for) {
  net::EventLoop loop;
  auto follower =
      std::make_unique<JobFollower>(loop, options, job, watch, on_change, reconnect_for);
  follower->Connect();
  loop.Run();
  Status result = follower->result();
  follower.reset();
  loop.Poll();  // let the closing session finish its callbacks
  return result;
}

Status FollowLog(const net::ClientOptions& options, const std::string& task,
                 const std::string& stream,
                 const std::function<void(std::string_view)>& on_bytes) {
  net::EventLoop loop;
  Status result = Unavailable("log stream of " + task + " ended without an end-of-log mark");
  bool finished = false;
  auto finish = [&](Status s) {
    if (finished) return;
    finished = true;
    result = std::move(s);
    loop.Stop();
  };
  std::shared_ptr<net::WsSession> session;
  net::ConnectWebSocket(
      loop, options, "/api/v1/tasks/" + task + "/logs/follow?stream=" + stream,
      [&](Result<std::shared_ptr<net::WsSession>> s) {
        if (!s.ok()) return finish(s.status());
        session = *s;
        session->OnBinary([&](std::string bytes) { on_bytes(bytes); });
        session->OnText([&](std::string text) {
          nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
          if (!j.is_object()) return;
          const std::string type = j.value("type", "");
          if (type == "eof") finish(Status::Ok());
          if (type == "error") {
            finish(Unavailable(j.value("message", std::string("log stream error"))));
          }
        });
        session->OnClose([&](const Status& why) {
          if (!why.ok()) finish(why);
          else finish(result);
        });
      });
  loop.Run();
  if (session) session->Close("done");
  loop.Poll();
  session.reset();
  return result;
}

}  // namespace drover::cli
