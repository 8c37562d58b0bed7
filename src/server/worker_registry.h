// WorkerRegistry: stable worker ids, one per worker name, kept across server
// restarts so that a worker re-attaching after a restart is recognised as
// the same worker (its running tasks are matched, not re-run).
//
// The map lives in "<state_dir>/workers.json" (mode 0600) as
//   {"next_id": 4, "workers": {"gpu-box": 1, "lab-pc-2": 2, "lab-pc-3": 3},
//    "active": [1, 3], "keys": {"gpu-box": "<sha-256 hex>", ...}}
// and is rewritten atomically (temporary file + rename, fsynced) whenever a
// new name is seen or the active set changes. Ids start at 1 and are never
// reused. Changes may be staged and written together (Stage, StageInactive,
// Commit): the server stages the hellos of one turn of its loop and writes
// them once, so a thousand machines joining at once cost a few writes, not a
// thousand whole-file writes on the loop.
//
// "active" are the workers that attached and were not declared lost since:
// only they may hold an assignment the journal never saw, so after a crash
// the restored core waits for them (restore_settle), not for every machine
// that ever joined. A worker is marked active, durably, before the core
// hears of it and so before any assignment can go to it. A file without
// "active" (older versions) counts every worker as active.
//
// "keys": a name belongs to one worker identity. Each worker keeps a random
// key in its work directory (worker/identity.h) and sends it in its hello;
// the first key seen for a name is recorded (as its SHA-256 only, so the
// file does not hold what a worker would need to pass as that one), and a
// hello for that name with any other key is refused. A name registered by
// an older version (no key yet) is claimed by the first key that comes.
// To give a name to a new machine (its key lost), stop the server and
// remove the name's entry under "keys".
//
// Thread safety: none; the server's event loop owns it.
#ifndef DROVER_SERVER_WORKER_REGISTRY_H_
#define DROVER_SERVER_WORKER_REGISTRY_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"

namespace drover::server {

class WorkerRegistry {
 public:
  // Loads the map from `path` (a missing file is an empty map). Errors: the
  // file exists but cannot be read or is not a valid map (kInvalidArgument
  // naming the file).
  static Result<std::unique_ptr<WorkerRegistry>> Open(std::string path);

  // A hello's whole record, in one write: the worker's identity, its id
  // and its active mark. `key` must be the identity of `name`: the
  // recorded one, or any when the name has none yet (then it becomes it,
  // as its SHA-256). A new name gets the next id. A known, active worker
  // with its key changes nothing and writes nothing. Errors:
  // kPermissionDenied when the name belongs to another key (the message
  // says how to resolve it); kInvalidArgument for a key shorter than 32 or
  // longer than 256 characters; a write error. On an error nothing
  // changes.
  Result<WorkerId> Admit(const std::string& name, const std::string& key);

  // Admit's change without its write: staged, in memory at once (Find,
  // Active and later stages see it), durable at the next Commit. The same
  // errors but the write's.
  Result<WorkerId> Stage(const std::string& name, const std::string& key);
  // MarkInactive's change, staged likewise.
  void StageInactive(WorkerId id);
  // Whether staged changes wait for a Commit.
  bool staged() const { return before_ != nullptr; }
  // Writes every staged change in one write (nothing when none is staged).
  // On an error every staged change is undone.
  Status Commit();

  // The id of a known name, without assigning.
  std::optional<WorkerId> Find(const std::string& name) const;
  // The name of a known id; empty when unknown.
  std::string NameOf(WorkerId id) const;

  // Every registered id (in name order).
  std::vector<WorkerId> Ids() const;
  // The active ids (ascending), as loaded and as marked since.
  std::vector<WorkerId> Active() const;
  // Marks `id` inactive (declared lost) and persists the change (a no-op
  // when it is so already). Errors: the file cannot be written (nothing
  // changes).
  Status MarkInactive(WorkerId id);

  size_t size() const { return state_.ids.size(); }
  // How many times the file was written (each write is a whole file and an
  // fsync: what a pool's first attach costs).
  uint64_t writes() const { return writes_; }

 private:
  explicit WorkerRegistry(std::string path) : path_(std::move(path)) {}
  Status Save();
  // The hash to record for `name` (its first key), none when `key` is the
  // one recorded, or why it cannot be this name's.
  Result<std::optional<std::string>> KeyToRecord(const std::string& name,
                                                 const std::string& key) const;

  // What the file holds, and what a failed Commit goes back to.
  struct State {
    std::map<std::string, WorkerId> ids;
    std::set<WorkerId> active;
    std::map<std::string, std::string> keys;  // name -> SHA-256 hex of its key
    WorkerId next_id = 1;
  };
  // Before a change: keeps the state to go back to, once per Commit.
  void BeginChange();

  std::string path_;
  State state_;
  std::unique_ptr<State> before_;  // set while changes are staged
  uint64_t writes_ = 0;
};

}  // namespace drover::server

#endif  // DROVER_SERVER_WORKER_REGISTRY_H_
