// The `code` of a job's cached task groups (core/result_cache.h): each
// pattern a job file or `--code` names ("train.py", "lib/*.py"), relative
// to the job file's directory (the current one for flags), expanded with
// glob(3) and replaced by the files it matches, each with its SHA-256, so
// the server's key changes when the code does. The files never leave the
// client.
//
// Thread safety: pure functions (file reads).
#ifndef DROVER_CLI_CODE_FILES_H_
#define DROVER_CLI_CODE_FILES_H_

#include <string>

#include "common/status.h"
#include "core/model.h"

namespace drover::cli {

// Hashes every group's unhashed `code` patterns. kInvalidArgument names a
// pattern that matches no file ("code pattern \"lib/*.py\" of task
// \"train\" matches no file") or a file that cannot be read.
Status HashCodeFiles(core::JobSpec& spec, const std::string& base_dir);

}  // namespace drover::cli

#endif  // DROVER_CLI_CODE_FILES_H_
