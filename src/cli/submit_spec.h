// SubmitSpec: turns `drover submit` flags into the submit API's JSON body
// (a one-group job), checked by the same decoder the server and job files
// use (proto::JobSpecFromJson), so a bad flag fails here with a clear
// message and nothing is sent.
//
// Thread safety: pure functions.
#ifndef DROVER_CLI_SUBMIT_SPEC_H_
#define DROVER_CLI_SUBMIT_SPEC_H_

#include <string>
#include <vector>

#include "common/status.h"

namespace drover::cli {

struct SubmitFlags {
  std::string name;      // job and group name; default: basename of argv[0]
  std::string cpus;      // "2", "0.5", "500m"; empty = server default (1)
  std::string mem;       // "4GiB"
  std::string gpus;      // "1", "0.25"
  std::string gpu_type;  // "A100" or "A100,H100"
  std::string gpu_mem;   // "16GiB"
  std::string array;     // "0-7"
  std::string timeout;   // "2h"
  std::string max_output;  // "2GiB": the most the task's outputs may add up to
  std::string network;     // "none": a network of its own (job files' `network`)
  std::string disk;        // "20GiB": the most its directory may hold (job files' `disk`)
  std::string io_read_bps;   // "50MiB": disk reads per second (job files' `io_read_bps`)
  std::string io_write_bps;  // "10MiB": disk writes per second
  int io_weight = -1;        // 1-10000: its share of the disk; -1: none given
  std::string image;         // the container image it runs in (job files' `image`)
  std::string image_pull;    // "missing", "always", "never" (job files' `image_pull`)
  // Local files for the task's directory (--input); uploaded before the
  // submit (upload_inputs.h).
  std::vector<std::string> inputs;
  int retries = 0;
  int replicas = 1;  // copies of its outputs to keep (job files' `replicas`)
  int priority = 0;
  std::vector<std::string> after;  // "12", "12.3"
  std::vector<std::string> env;    // "KEY=VALUE"
  std::vector<std::string> labels;    // "os=linux": only workers with this label
  std::vector<std::string> counters;  // "licenses=2": custom counters per task
  std::string user;                   // the job's user (job files' `user`)
  bool cache = false;                 // reuse an earlier identical task's result
  std::vector<std::string> code;      // files that are its code, for the cache key
  std::vector<std::string> command;
};

// The canonical JSON of the job (proto::JobSpecToJson). Errors
// (kInvalidArgument) name the flag: "--mem: memory quantity \"4G\" is
// ambiguous: ...".
Result<std::string> BuildSubmitBody(const SubmitFlags& flags);

// kInvalidArgument when `command` is a job file rather than a command (one
// argument, an existing file named *.toml or *.json that is not
// executable): `drover submit job.toml` would run "job.toml" and fail on
// the worker with "command not found"; the error points to `drover run`.
Status CheckNotAJobFile(const std::vector<std::string>& command);

}  // namespace drover::cli

#endif  // DROVER_CLI_SUBMIT_SPEC_H_
