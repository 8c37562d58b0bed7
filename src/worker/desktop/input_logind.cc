// The logind backend of InputSource (input_source.h): the idle hints of
// the graphical sessions, through loginctl.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <utility>
#include <vector>

#include "worker/desktop/input_backends.h"
#include "worker/desktop/input_source.h"

namespace drover::worker {
namespace {

// loginctl costs a few milliseconds and blocks the agent's loop: once a
// second is plenty for a hint desktops set minutes after the last input.
constexpr Duration kLogindRefresh = Seconds(1);
constexpr Duration kLoginctlTimeout = Millis(500);

bool IsGraphical(std::string_view type) {
  return type == "x11" || type == "wayland" || type == "mir";
}

std::string_view TrimLogind(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// The session ids, first column of `loginctl list-sessions --no-legend`.
std::vector<std::string> ParseSessionList(std::string_view text) {
  std::vector<std::string> ids;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = TrimLogind(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty()) continue;
    ids.emplace_back(line.substr(0, line.find_first_of(" \t")));
  }
  return ids;
}

class LogindInputSource final : public InputSource {
 public:
  explicit LogindInputSource(InputSourceEnv env) : env_(std::move(env)) {}

  // Asks loginctl and, on success, replaces what the last answer said.
  // `must_find_session`: no session at all is an error (at construction).
  Status Refresh(bool must_find_session);

  std::optional<Time> LastInput() override;
  std::string Describe() const override;

 private:
  Result<std::string> Loginctl(std::vector<std::string> args) const;

  InputSourceEnv env_;
  std::optional<Time> last_query_;
  // The last answer: some active graphical session is not idle (input now),
  // and the latest IdleSinceHint among the graphical sessions otherwise.
  bool present_ = false;
  std::optional<Time> idle_since_;
  std::vector<std::string> graphical_;
  std::string error_;  // why the latest query failed; empty when it did not
  std::optional<Time> latest_;
};

Result<std::string> LogindInputSource::Loginctl(std::vector<std::string> args) const {
  args.insert(args.begin(), "loginctl");
  Result<std::string> out = env_.run_program(args, kLoginctlTimeout);
  if (out.ok()) return out;
  if (out.status().code() == StatusCode::kNotFound) {
    return NotFound("logind: loginctl is not installed");
  }
  return FailedPrecondition("logind: " + out.status().message());
}

Status LogindInputSource::Refresh(bool must_find_session) {
  last_query_ = env_.clock->Now();
  ASSIGN_OR_RETURN(std::string listing, Loginctl({"list-sessions", "--no-legend"}));
  const std::vector<std::string> ids = ParseSessionList(listing);
  if (ids.empty() && must_find_session) {
    return NotFound("logind: no session (loginctl list-sessions lists none)");
  }
  bool present = false;
  std::optional<Time> idle_since;
  std::vector<std::string> graphical;
  std::optional<Status> first_failure;
  size_t shown_any = 0;
  for (const std::string& id : ids) {
    Result<std::string> shown = Loginctl({"show-session", id, "-p", "IdleHint", "-p",
                                          "IdleSinceHint", "-p", "Type", "-p", "Active"});
    // A session that ended since the listing is not an error; every one
    // failing is.
    if (!shown.ok()) {
      if (!first_failure) first_failure = shown.status();
      continue;
    }
    ++shown_any;
    Result<LogindIdle> session = ParseLogindSession(*shown);
    if (!session.ok()) {
      return FailedPrecondition("logind: loginctl show-session " + id + ": " +
                                session.status().message());
    }
    if (!IsGraphical(session->type)) continue;
    graphical.push_back(id);
    // Nobody types into a session on another VT, whatever its hint says.
    if (session->active && !session->idle) present = true;
    if (session->idle_since && (!idle_since || *session->idle_since > *idle_since)) {
      idle_since = session->idle_since;
    }
  }
  if (shown_any == 0 && first_failure) return *first_failure;
  present_ = present;
  idle_since_ = idle_since;
  // Input at the time of asking, even if LastInput() comes only after the
  // next answer says idle.
  if (present && (!latest_ || *last_query_ > *latest_)) latest_ = last_query_;
  graphical_ = std::move(graphical);
  return Status::Ok();
}

std::optional<Time> LogindInputSource::LastInput() {
  const Time now = env_.clock->Now();
  if (!last_query_ || now - *last_query_ >= kLogindRefresh || now < *last_query_) {
    Status refreshed = Refresh(/*must_find_session=*/false);
    error_ = refreshed.ok() ? "" : refreshed.message();
  }
  std::optional<Time> seen = present_ ? std::optional<Time>(now) : idle_since_;
  if (seen && (!latest_ || *seen > *latest_)) latest_ = seen;
  return latest_;
}

std::string LogindInputSource::Describe() const {
  std::string out;
  if (graphical_.empty()) {
    out = "logind (no graphical session)";
  } else {
    out = graphical_.size() == 1 ? "logind session " : "logind sessions ";
    for (size_t i = 0; i < graphical_.size(); ++i) out += (i > 0 ? ", " : "") + graphical_[i];
  }
  if (!error_.empty()) out += "; last query failed: " + error_;
  return out;
}

}  // namespace

Result<LogindIdle> ParseLogindSession(std::string_view text) {
  LogindIdle idle;
  bool has_idle_hint = false;
  int number = 0;
  auto yes_no = [](std::string_view value) -> std::optional<bool> {
    if (value == "yes") return true;
    if (value == "no") return false;
    return std::nullopt;
  };
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = TrimLogind(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++number;
    if (line.empty()) continue;
    auto bad = [&](std::string_view why) {
      return InvalidArgument("line " + std::to_string(number) + " \"" + std::string(line) +
                             "\": " + std::string(why));
    };
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) return bad("not KEY=VALUE");
    std::string_view key = line.substr(0, eq);
    std::string_view value = line.substr(eq + 1);
    if (key == "IdleHint" || key == "Active") {
      std::optional<bool> flag = yes_no(value);
      if (!flag) return bad("expected yes or no");
      if (key == "IdleHint") {
        idle.idle = *flag;
        has_idle_hint = true;
      } else {
        idle.active = *flag;
      }
    } else if (key == "IdleSinceHint") {
      uint64_t us = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), us);
      if (!value.empty() && (ec != std::errc() || end != value.data() + value.size() ||
                             us > static_cast<uint64_t>(INT64_MAX))) {
        return bad("expected microseconds since the epoch");
      }
      idle.idle_since =
          us == 0 ? std::nullopt : std::optional<Time>(TimeFromMicros(static_cast<int64_t>(us)));
    } else if (key == "Type") {
      idle.type = std::string(value);
    }
  }
  if (!has_idle_hint) return InvalidArgument("no IdleHint line");
  return idle;
}

Result<std::unique_ptr<InputSource>> MakeLogindInputSource(InputSourceEnv env) {
  auto source = std::make_unique<LogindInputSource>(std::move(env));
  RETURN_IF_ERROR(source->Refresh(/*must_find_session=*/true));
  return std::unique_ptr<InputSource>(std::move(source));
}

}  // namespace drover::worker
