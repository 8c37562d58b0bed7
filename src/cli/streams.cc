#include "cli/streams.h"

#include <chrono>
#include <memory>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/api_client.h"
#include "cli/cli_common.h"
#include "net/backoff.h"
#include "net/http_types.h"
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

Time SteadyNow() { return Time(SystemClock().Monotonic()); }

// Connects, feeds events to the watch and reconnects until done or out of
// time. Everything runs on the loop thread.
class JobFollower {
 public:
  JobFollower(net::EventLoop& loop, const net::ClientOptions& options, JobWatch& watch,
              const JobChangeFn& on_change, Duration reconnect_for)
      : loop_(loop),
        options_(options),
        watch_(watch),
        on_change_(on_change),
        reconnect_for_(reconnect_for),
        retry_(loop),
        backoff_(net::BackoffOptions{Millis(200), Seconds(5), 2.0, 0.5},
                 [rng = std::make_shared<std::mt19937>(std::random_device{}())] {
                   return std::uniform_real_distribution<double>(0.0, 1.0)(*rng);
                 }) {}

  // Follows `job`, connecting now.
  void Follow(JobId job) {
    target_ = EventsTarget(job);
    Connect();
  }

  // Posts the job, then follows it on the same connection. Until the
  // server has answered, a failure ends it all: the job may exist, and a
  // write is never sent twice.
  void SubmitThenFollow(std::string spec_json, std::function<void(JobId)> on_submitted) {
    net::ClientRequest post;
    post.method = "POST";
    post.target = "/api/v1/jobs";
    post.body = std::move(spec_json);
    net::RequestThenWebSocket(
        loop_, options_, std::move(post),
        [this, on_submitted = std::move(on_submitted)](
            const net::Response& answer) -> Result<std::string> {
          auto role = answer.headers.find("x-drover-role");
          if (answer.status == 307 && role != answer.headers.end() && role->second == "standby") {
            redirected_ = true;
            return Unavailable("server " + AddressOf(options_) + " is a standby");
          }
          RETURN_IF_ERROR(net::StatusFromResponse(answer));
          nlohmann::json reply = nlohmann::json::parse(answer.body, nullptr, false);
          auto id = reply.is_object() ? reply.find("id") : reply.end();
          if (!reply.is_object() || id == reply.end() || !id->is_number_unsigned()) {
            return Internal("the server's answer has no job id: " + answer.body);
          }
          job_ = id->get<JobId>();
          target_ = EventsTarget(*job_);
          on_submitted(*job_);
          PrintSubmitWarnings(*job_, reply);
          return target_;
        },
        [this](Result<std::shared_ptr<net::WsSession>> session) {
          if (!session.ok()) {
            if (!job_) return Finish(session.status());
            return Lost(session.status());
          }
          OnOpen(std::move(*session));
        });
  }

  void Connect() {
    net::ConnectWebSocket(loop_, options_, target_,
                          [this](Result<std::shared_ptr<net::WsSession>> session) {
                            if (!session.ok()) return Lost(session.status());
                            OnOpen(std::move(*session));
                          });
  }

  const Status& result() const { return result_; }
  std::optional<JobId> job() const { return job_; }
  bool redirected() const { return redirected_; }

 private:
  static std::string EventsTarget(JobId job) {
    return "/api/v1/events?job=" + std::to_string(job) + "&batch=true";
  }

  void OnOpen(std::shared_ptr<net::WsSession> session) {
    session_ = session;
    offline_since_.reset();
    backoff_.Reset();
    session->OnText([this](std::string text) {
      Result<std::vector<TaskEventView>> events = DecodeTaskEvents(text);
      if (!events.ok()) return;  // noise: not ours to judge
      for (const TaskEventView& event : *events) {
        if (finished_) return;
        if (watch_.Apply(event) && on_change_) on_change_(event, watch_);
        if (watch_.done()) Finish(Status::Ok());
      }
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
  std::optional<JobId> job_;  // once submitted (SubmitThenFollow)
  bool redirected_ = false;
};

}  // namespace

Status FollowJob(const net::ClientOptions& options, JobId job, JobWatch& watch,
                 const JobChangeFn& on_change, Duration reconnect_for) {
  net::EventLoop loop;
  auto follower = std::make_unique<JobFollower>(loop, options, watch, on_change, reconnect_for);
  follower->Follow(job);
  loop.Run();
  Status result = follower->result();
  follower.reset();
  loop.Poll();  // let the closing session finish its callbacks
  return result;
}

SubmitFollowResult SubmitAndFollowJob(const net::ClientOptions& options, std::string spec_json,
                                      JobWatch& watch,
                                      const std::function<void(JobId)>& on_submitted,
                                      const JobChangeFn& on_change, Duration reconnect_for) {
  net::EventLoop loop;
  auto follower = std::make_unique<JobFollower>(loop, options, watch, on_change, reconnect_for);
  follower->SubmitThenFollow(std::move(spec_json), on_submitted);
  loop.Run();
  SubmitFollowResult result{follower->result(), follower->job(), follower->redirected()};
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
