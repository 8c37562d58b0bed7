// SpareDirs: empty directories kept for reuse as tasks' `output/` and
// checkpoint directories, so that a task's start makes one directory
// instead of three, on a work directory where a new inode is dear.
//
// Why: ext4 without a journal (mkfs -O ^has_journal, as some cloud images
// are) does not reuse an inode freed in the last one to six minutes, and
// finds a free one by walking past each of them in the inode table: after
// many files were deleted, making a directory costs hundreds of
// microseconds, and the three of a task's start were most of a worker's
// CPU per task (bench/README.md). A succeeded task's `output/` (when it
// wrote no outputs) and its checkpoint directory (when it left none) are
// empty and never used again: moved here instead, the next task's come
// back with a rename each. Elsewhere a rename out and back costs more than
// a mkdir (38 against 21 us on ext4 with a journal), so the executor keeps
// spares only where InodesDearAfterDeletes says so.
//
// Spare directories live in `dir` (private to the worker), kept apart by
// owner: a directory goes back only to a task of the account that owned
// it, so nothing one account set on it (an ACL, its mode) reaches another;
// the mode is set again on reuse. At most `per_owner` are kept per owner;
// what is left from an earlier run of the worker is removed at Open.
//
//   SpareDirs spare(workdir + "/.spare");
//   RETURN_IF_ERROR(spare.Open());
//   RETURN_IF_ERROR(spare.Make(task + "/output", 0700));   // reused or made
//   spare.Recycle(task + "/output");                        // when it is empty
//
// Threading: one thread (the executor's loop).
#ifndef DROVER_WORKER_EXEC_SPARE_DIRS_H_
#define DROVER_WORKER_EXEC_SPARE_DIRS_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace drover::worker {

class SpareDirs {
 public:
  explicit SpareDirs(std::string dir, size_t per_owner = 64);

  // Makes `dir` (private to the worker) and removes what an earlier run
  // left in it.
  Status Open();

  // `path` as mkdir(path, mode) would make it, as a spare directory of
  // `owner` (the account it will be handed to; chown is the caller's)
  // renamed into place when one is kept. An existing `path` is left as it
  // is (as MakeDir does). Fails as mkdir would.
  Status Make(const std::string& path, mode_t mode, uid_t owner);

  // Takes the directory `path` as a spare of its owner when it is empty
  // and there is room; false when it stays where it is.
  bool Recycle(const std::string& path);

  // Kept now, for tests and logs.
  size_t kept() const;

 private:
  std::string dir_;
  size_t per_owner_;
  uint64_t next_ = 0;
  std::map<uid_t, std::vector<std::string>> spare_;
};

// Whether the directory `dir` holds anything; false when it cannot be read.
bool HasEntries(const std::string& dir);

// True when `dir` is on ext4 without a journal (no /proc/fs/jbd2 entry for
// its block device), where new inodes are dear after deletions.
bool InodesDearAfterDeletes(const std::string& dir);

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_SPARE_DIRS_H_
