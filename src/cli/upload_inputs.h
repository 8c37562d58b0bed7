// Uploads the local files a job names for its tasks' directories (`drover
// submit --input`, job files' `input_files`) to the server's file store,
// so a task on any worker finds them (docs/guide.md, "Files from the
// client").
//
// Content-addressed: each file is hashed first and sent only when the
// server lacks it (HEAD /api/v1/files/{sha256}, then PUT), so a second
// submission of the same file sends nothing.
//
// Thread safety: none; a client's one thread.
#ifndef DROVER_CLI_UPLOAD_INPUTS_H_
#define DROVER_CLI_UPLOAD_INPUTS_H_

#include <ostream>
#include <string>

#include "common/status.h"
#include "core/model.h"
#include "net/client_options.h"

namespace drover::cli {

// For each input file of `spec` that holds a path (no sha256 yet): hashes
// the file (relative paths start at `base_dir`; empty: the current
// directory), uploads it unless the server has it, and makes the entry
// {name: the path's last part, size, sha256}. Says what it sent on `log`.
// Errors name the file: one that cannot be read, a directory, two files
// with the same last part, a refused upload.
Status UploadInputFiles(const net::ClientOptions& server, core::JobSpec& spec,
                        const std::string& base_dir, std::ostream& log);

}  // namespace drover::cli

#endif  // DROVER_CLI_UPLOAD_INPUTS_H_
