#include "core/input_select.h"

#include <fnmatch.h>

#include <algorithm>

namespace drover::core {
namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool Matches(const InputSelector& sel, const std::string& name) {
  if (sel.name.empty()) return true;
  if (name == sel.name) return true;
  return sel.glob && ::fnmatch(sel.name.c_str(), name.c_str(), FNM_PATHNAME) == 0;
}

// The selectors of `consumer` naming group `producer`; nullopt when the
// task takes everything (no `inputs`).
std::optional<std::vector<InputSelector>> SelectorsFor(const TaskGroupSpec& consumer,
                                                       std::string_view producer) {
  if (!consumer.inputs) return std::nullopt;
  std::vector<InputSelector> out;
  for (const std::string& text : *consumer.inputs) {
    Result<InputSelector> sel = ParseInputSelector(text, consumer.depends_on);
    if (sel.ok() && sel->group == producer) out.push_back(std::move(sel).value());
  }
  return out;
}

bool Selected(const std::optional<std::vector<InputSelector>>& selectors, const OutputFile& f) {
  if (!selectors) return true;
  return std::any_of(selectors->begin(), selectors->end(),
                     [&](const InputSelector& s) { return Matches(s, f.name); });
}

}  // namespace

Result<InputSelector> ParseInputSelector(std::string_view text,
                                         const std::vector<std::string>& depends_on) {
  if (text.empty()) return InvalidArgument("the selector is empty");
  auto depends = [&](std::string_view group) {
    return std::find(depends_on.begin(), depends_on.end(), group) != depends_on.end();
  };
  InputSelector sel;
  if (depends(text)) {
    sel.group = std::string(text);
    return sel;
  }
  const size_t colon = text.find(':');
  const std::string_view group = text.substr(0, colon);
  if (!depends(group)) {
    std::string message = "\"" + std::string(group) + "\" is not a task this one depends on";
    message +=
        depends_on.empty() ? " (it has no depends_on)" : " (depends_on: " + Join(depends_on) + ")";
    return InvalidArgument(message);
  }
  const std::string_view name = text.substr(colon + 1);
  if (name.empty()) return InvalidArgument("the file name after ':' is empty");
  if (std::string problem = OutputNameProblem(name); !problem.empty()) {
    return InvalidArgument("the file name " + problem);
  }
  sel.group = std::string(group);
  sel.name = std::string(name);
  sel.glob = name.find_first_of("*?[") != std::string_view::npos;
  return sel;
}

Status CheckInputs(const TaskGroupSpec& group) {
  if (!group.inputs) return Status::Ok();
  for (const std::string& text : *group.inputs) {
    Result<InputSelector> sel = ParseInputSelector(text, group.depends_on);
    if (!sel.ok()) {
      return InvalidArgument("task \"" + group.name + "\": inputs \"" + text +
                             "\": " + sel.status().message());
    }
  }
  return Status::Ok();
}

std::vector<OutputFile> SelectOutputs(const TaskGroupSpec& consumer, std::string_view producer,
                                      const std::vector<OutputFile>& outputs) {
  const auto selectors = SelectorsFor(consumer, producer);
  if (!selectors) return outputs;
  std::vector<OutputFile> out;
  for (const OutputFile& f : outputs) {
    if (Selected(selectors, f)) out.push_back(f);
  }
  return out;
}

uint64_t SelectedBytes(const TaskGroupSpec& consumer, std::string_view producer,
                       const std::vector<OutputFile>& outputs) {
  const auto selectors = SelectorsFor(consumer, producer);
  uint64_t bytes = 0;
  for (const OutputFile& f : outputs) {
    if (Selected(selectors, f)) bytes += f.size;
  }
  return bytes;
}

std::string MissingInput(const TaskGroupSpec& consumer, std::string_view producer,
                         std::string_view label, const std::vector<OutputFile>& outputs) {
  const auto selectors = SelectorsFor(consumer, producer);
  if (!selectors) return {};
  for (const InputSelector& sel : *selectors) {
    if (sel.name.empty() || sel.glob) continue;
    const bool found = std::any_of(outputs.begin(), outputs.end(),
                                   [&](const OutputFile& f) { return f.name == sel.name; });
    if (found) continue;
    constexpr size_t kListed = 10;
    std::string wrote;
    for (size_t i = 0; i < outputs.size() && i < kListed; ++i) {
      wrote += (i == 0 ? "" : ", ") + outputs[i].name;
    }
    if (outputs.size() > kListed) {
      wrote += " and " + std::to_string(outputs.size() - kListed) + " more";
    }
    return "input \"" + sel.group + ":" + sel.name + "\": " + std::string(label) +
           " wrote no such output (" + (outputs.empty() ? "it wrote none" : "it wrote: " + wrote) +
           ")";
  }
  return {};
}

}  // namespace drover::core
