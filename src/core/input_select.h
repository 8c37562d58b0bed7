// Input selection: which outputs of its dependencies a task fetches
// (core::TaskGroupSpec::inputs; docs/guide.md, job files).
//
// A selector is one string of a task's `inputs`:
//   "prep"           every output of every task of group prep;
//   "prep:train.csv" the output named train.csv of each task of prep;
//   "prep:*.csv"     the outputs whose names match the glob (fnmatch with
//                    FNM_PATHNAME: '*' does not cross a '/').
// The group part must be one the task depends_on; the name part follows
// OutputNameProblem's rules. The group is the whole selector when that is a
// group the task depends on, else the part before the first ':'.
//
// Without `inputs` a task gets every output of its dependencies; with
// `inputs = []` none. Results ($DROVER_RESULT) always go. A name without a
// glob character ('*', '?', '[') must have been written by every task of its
// group (MissingInput); a glob may match nothing.
//
// Thread safety: pure functions.
#ifndef DROVER_CORE_INPUT_SELECT_H_
#define DROVER_CORE_INPUT_SELECT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/model.h"

namespace drover::core {

// One parsed selector.
struct InputSelector {
  std::string group;
  std::string name;   // empty: every output of the group
  bool glob = false;  // `name` holds '*', '?' or '['
  friend bool operator==(const InputSelector&, const InputSelector&) = default;
};

// Parses `text` for a task that depends on `depends_on`. Errors
// (kInvalidArgument) say what is wrong with the selector, without naming
// it: "\"x\" is not a task this one depends on (depends_on: a, b)",
// "the file name is empty", "the file name has a \"..\" path part".
Result<InputSelector> ParseInputSelector(std::string_view text,
                                         const std::vector<std::string>& depends_on);

// Checks every selector of `group`; the error names the task and the
// selector: task "train": inputs "prep:../x": the file name has a ".." path
// part. OK when `inputs` is absent.
Status CheckInputs(const TaskGroupSpec& group);

// The outputs of a task of group `producer` that a task of `consumer`
// fetches, in their order. Selectors that do not parse select nothing
// (CheckInputs refuses them at submit).
std::vector<OutputFile> SelectOutputs(const TaskGroupSpec& consumer, std::string_view producer,
                                      const std::vector<OutputFile>& outputs);

// Selected bytes: the sum of the sizes SelectOutputs would return.
uint64_t SelectedBytes(const TaskGroupSpec& consumer, std::string_view producer,
                       const std::vector<OutputFile>& outputs);

// Why a task of `consumer` cannot run with what task `label` (of group
// `producer`) left: the first selector naming a file without a glob that
// `outputs` lacks, e.g.
//   input "prep:train.csv": prep[0] (12.0) wrote no such output (it wrote:
//   a.csv, b.csv)
// Empty when nothing is missing.
std::string MissingInput(const TaskGroupSpec& consumer, std::string_view producer,
                         std::string_view label, const std::vector<OutputFile>& outputs);

}  // namespace drover::core

#endif  // DROVER_CORE_INPUT_SELECT_H_
