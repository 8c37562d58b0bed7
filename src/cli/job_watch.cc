#include "cli/job_watch.h"

#include <nlohmann/json.hpp>

namespace drover::cli {

bool IsTerminalStateName(std::string_view state) {
  return state == "succeeded" || state == "failed" || state == "canceled";
}

namespace {

Result<TaskEventView> DecodeEvent(const nlohmann::json& j, std::string_view text) {
  if (!j.is_object()) return InvalidArgument("event is not a JSON object");
  auto type = j.find("type");
  if (type == j.end() || !type->is_string()) return InvalidArgument("event without a type");
  if (*type != "task_state") return NotFound("event of type " + type->get<std::string>());
  TaskEventView e;
  auto text_field = [&](const char* key, std::string* out, bool required) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return !required;
    if (!it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  if (!text_field("task", &e.task, true) || !text_field("to", &e.to, true) ||
      !text_field("from", &e.from, false) || !text_field("reason", &e.reason, false)) {
    return InvalidArgument("task_state event with a missing or mistyped field: " +
                           std::string(text.substr(0, 200)));
  }
  if (e.task.empty() || e.to.empty()) {
    // A watch would count "" as one of the job's tasks (fuzz/events_fuzz.cc).
    return InvalidArgument("task_state event with an empty task or state: " +
                           std::string(text.substr(0, 200)));
  }
  if (auto it = j.find("attempt"); it != j.end() && it->is_number_unsigned()) {
    e.attempt = it->get<uint32_t>();
  }
  return e;
}

}  // namespace

Result<TaskEventView> DecodeTaskEventView(std::string_view text) {
  return DecodeEvent(nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false), text);
}

Result<std::vector<TaskEventView>> DecodeTaskEvents(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  // One event is a batch of one.
  const bool batch = j.is_array();
  const size_t count = batch ? j.size() : 1;
  std::vector<TaskEventView> events;
  events.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    Result<TaskEventView> e = DecodeEvent(batch ? j[i] : j, text);
    if (e.ok()) {
      events.push_back(std::move(*e));
    } else if (e.status().code() != StatusCode::kNotFound) {
      return e.status();
    }
  }
  return events;
}

bool JobWatch::Apply(const TaskEventView& event) {
  auto [it, added] = tasks_.try_emplace(event.task, Known{event.to, event.attempt, event.reason});
  if (added) {
    Recount("", event.to);
    return true;
  }
  if (it->second.state == event.to && it->second.attempt == event.attempt) return false;
  Recount(it->second.state, event.to);
  it->second = Known{event.to, event.attempt, event.reason};
  return true;
}

void JobWatch::Recount(std::string_view from, std::string_view to) {
  if (!from.empty()) {
    auto it = counts_.find(from);
    if (--it->second == 0) counts_.erase(it);
    if (IsTerminalStateName(from)) --terminal_;
  }
  auto it = counts_.find(to);
  if (it == counts_.end()) it = counts_.emplace(std::string(to), 0).first;
  ++it->second;
  if (IsTerminalStateName(to)) ++terminal_;
}

std::string JobWatch::EndLine() const {
  if (task_count_ == 1 && tasks_.size() == 1) {
    const auto& [id, known] = *tasks_.begin();
    std::string line = "task " + id + " " + known.state;
    if (known.attempt > 1) line += " (attempt " + std::to_string(known.attempt) + ")";
    if (!known.reason.empty() && known.state != "succeeded") line += ": " + known.reason;
    return line;
  }
  std::string line;
  for (const char* state : {"succeeded", "failed", "canceled"}) {
    const uint64_t n = count(state);
    if (n == 0) continue;
    line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  }
  return line.empty() ? "no tasks" : line;
}

bool JobWatch::done() const { return tasks_.size() >= task_count_ && terminal_ == tasks_.size(); }

uint64_t JobWatch::count(std::string_view state) const {
  auto it = counts_.find(state);
  return it == counts_.end() ? 0 : it->second;
}

std::string JobWatch::ProgressLine(int width) const {
  const uint64_t finished = count("succeeded") + count("failed") + count("canceled");
  const uint64_t total = task_count_ == 0 ? 1 : task_count_;
  const int filled = static_cast<int>(finished * static_cast<uint64_t>(width) / total);
  std::string line = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] ";
  line += std::to_string(finished) + "/" + std::to_string(task_count_) + " done";
  for (const char* state : {"running", "assigned", "queued", "waiting", "failed", "canceled"}) {
    if (uint64_t n = count(state); n > 0) line += "  " + std::to_string(n) + " " + state;
  }
  return line;
}

}  // namespace drover::cli
