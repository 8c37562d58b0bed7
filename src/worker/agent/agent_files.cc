// Agent::Impl (agent_impl.h): what the agent asks of the data plane
// (file_plane.h). Assignments held until their input files, uploads and
// checkpoint are here; checkpoints saved while an attempt runs and before
// a failed one's report; copies of another worker's outputs (replicas).
#include <spdlog/spdlog.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker/agent/agent_impl.h"

namespace drover::worker {

void Agent::Impl::SaveCheckpoints() {
  for (const auto& [task, known] : known_logs_) {
    // Without a connection there is no server to save to (the first round
    // after the reconnect saves what changed).
    if (!session_ || state_->RunningAttempt(task) != known.attempt ||
        !HasEntries(known.dirs.checkpoint)) {
      continue;
    }
    std::weak_ptr<bool> alive = alive_;
    files_->SaveCheckpoint(task, known.attempt, known.dirs.checkpoint, /*final=*/false,
                           [this, alive, task = task, attempt = known.attempt](
                               Result<std::optional<std::vector<core::OutputFile>>> saved) {
                             if (alive.expired() || !*alive.lock()) return;
                             SendCheckpoint(task, attempt, std::move(saved));
                           });
  }
  checkpoint_timer_.ArmAfter(config_.checkpoint_every, [this] { SaveCheckpoints(); });
}

void Agent::Impl::SendCheckpoint(TaskId task, uint32_t attempt,
                                 Result<std::optional<std::vector<core::OutputFile>>> saved) {
  if (!saved.ok()) {
    spdlog::warn("worker {}: checkpoint of {}#{} not saved: {}", name_, task.ToString(), attempt,
                 saved.status().ToString());
    return;
  }
  if (!*saved) return;
  spdlog::info("worker {}: checkpoint of {}#{} saved ({} files)", name_, task.ToString(), attempt,
               (*saved)->size());
  Send(proto::CheckpointSaved{task, attempt, std::move(**saved)});
}

void Agent::Impl::ReportAfterCheckpoint(const TaskResult& result, core::TaskOutcome outcome) {
  // An attempt that ended otherwise than in success while this worker
  // lives (failed, timed out, canceled, vacated, drained) leaves its
  // checkpoint to the next one: saved, and reported before its end, so the
  // server has it before it places the retry.
  auto known = known_logs_.find(result.id);
  const bool succeeded = result.outcome == TaskOutcome::kSucceeded && outcome.reason.empty();
  if (!files_ || succeeded || !session_ || known == known_logs_.end() ||
      known->second.attempt != result.attempt || !HasEntries(known->second.dirs.checkpoint)) {
    if (files_) files_->ForgetCheckpoint(result.id);
    return ReportDone(result, std::move(outcome));
  }
  std::weak_ptr<bool> alive = alive_;
  files_->SaveCheckpoint(result.id, result.attempt, known->second.dirs.checkpoint, /*final=*/true,
                         [this, alive, result, outcome = std::move(outcome)](
                             Result<std::optional<std::vector<core::OutputFile>>> saved) mutable {
                           if (alive.expired() || !*alive.lock()) return;
                           SendCheckpoint(result.id, result.attempt, std::move(saved));
                           files_->ForgetCheckpoint(result.id);
                           ReportDone(result, std::move(outcome));
                         });
}

void Agent::Impl::OnReplicate(const proto::Replicate& copy) {
  const std::string what =
      "a copy of the outputs of " + copy.task.ToString() + "#" + std::to_string(copy.attempt);
  if (!files_) {
    spdlog::warn("worker {}: no {}: this worker keeps no files", name_, what);
    return;
  }
  spdlog::info("worker {}: fetching {} ({} file(s))", name_, what, copy.files.size());
  const uint64_t gen = gen_;
  std::weak_ptr<bool> alive = alive_;
  files_->FetchCopy(copy.task.job, copy.files,
                    [this, alive, gen, what, task = copy.task, attempt = copy.attempt](Status s) {
                      if (alive.expired() || !*alive.lock()) return;
                      if (!s.ok()) {
                        spdlog::warn("worker {}: no {}: {}", name_, what, s.message());
                        return;
                      }
                      spdlog::info("worker {}: holds {}", name_, what);
                      // Said on the connection that asked; a later one finds
                      // the core asking again when a holder is lost.
                      if (gen == gen_ && session_) Send(proto::OutputsReplicated{task, attempt});
                    });
}

void Agent::Impl::HoldForInputs(proto::Assign& assign) {
  std::vector<proto::Assignment> now;
  for (proto::Assignment& a : assign.tasks) {
    // The checkpoint an earlier attempt saved is restored first, unless
    // this worker saved it and its own directory for the task still holds
    // something (at least as new as what it saved).
    const bool own = a.checkpoint_from == worker_id_.load() &&
                     HasEntries(CheckpointDirOf(config_.workdir, a.task));
    const bool restore = files_ && !a.checkpoint.empty() && !own;
    if ((a.files.empty() || (files_ && files_->HasInputs(a))) &&
        (a.uploads.empty() || (files_ && files_->HasUploads(a))) && !restore) {
      now.push_back(std::move(a));
      continue;
    }
    if (!files_) {
      Send(proto::Refused{a.task, a.attempt, "this worker does not fetch input files"});
      continue;
    }
    spdlog::info("worker {}: fetching {} input file(s){} of {}#{} before it starts", name_,
                 a.files.size() + a.uploads.size(),
                 restore ? " and " + std::to_string(a.checkpoint.size()) + " checkpoint file(s)"
                         : std::string(),
                 a.task.ToString(), a.attempt);
    const uint64_t gen = gen_;
    std::weak_ptr<bool> alive = alive_;
    auto held = std::make_shared<proto::Assignment>(std::move(a));
    // The state machine knows the attempt from now on: a stop that comes
    // during the fetch drops it there, and its end is then ignored.
    Run(InputsFetching{held->task, held->attempt});
    // Both steps answer the same way: refused on failure (the attempt goes
    // elsewhere without using a retry), else handed to the state machine.
    auto then = [this, alive, gen, held](Status status, std::function<void()> next) {
      if (alive.expired() || !*alive.lock()) return;
      // A new connection: the server took the attempt back at its hello.
      if (gen != gen_ || !session_) return;
      if (!status.ok()) {
        spdlog::warn("worker {}: {}#{} not started: {}", name_, held->task.ToString(),
                     held->attempt, status.message());
        return Run(InputsFetched{*held, status.message(), files_->CorruptInputs(*held)});
      }
      next();
    };
    auto start = [this, held] { Run(InputsFetched{*held, "", {}}); };
    files_->Fetch(*held, [this, then, start, held, restore](Status fetched) {
      then(fetched, [this, then, start, held, restore] {
        files_->FetchUploads(*held, [this, then, start, held, restore](Status uploaded) {
          then(uploaded, [this, then, start, held, restore] {
            if (!restore) return start();
            std::optional<std::pair<uid_t, gid_t>> owner = task_owner_;
            if (accounts_) {
              // A refused user: the start refuses it, with the reason.
              Result<std::shared_ptr<const TaskAccount>> account = accounts_->For(held->user);
              if (!account.ok()) return start();
              owner = std::pair((*account)->ids.uid, (*account)->ids.gid);
            }
            files_->RestoreCheckpoint(
                held->checkpoint, CheckpointDirOf(config_.workdir, held->task), owner,
                [this, then, start, held](Status restored) {
                  if (restored.code() == StatusCode::kNotFound) {
                    // Gone from the server for good: refusing would only move
                    // the attempt from worker to worker.
                    spdlog::warn("worker {}: {}#{} starts without its checkpoint: {}", name_,
                                 held->task.ToString(), held->attempt, restored.message());
                    restored = Status::Ok();
                  }
                  then(restored, start);
                });
          });
        });
      });
    });
  }
  assign.tasks = std::move(now);
}

}  // namespace drover::worker
