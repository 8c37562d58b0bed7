#include "server/freezable_store.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

namespace drover::server {

void FreezableStore::Flush() {
  if (!Frozen()) inner_->Flush();
}

void FreezableStore::Compact(std::vector<std::string> snapshot, DoneCallback done) {
  if (Frozen()) {
    done(Unavailable("the journal is frozen (test hook DROVER_TEST_FREEZE_JOURNAL)"));
    return;
  }
  inner_->Compact(std::move(snapshot), std::move(done));
}

bool FreezableStore::Frozen() {
  struct stat st;
  const bool exists = ::stat(freeze_file_.c_str(), &st) == 0;
  if (exists != frozen_) {
    frozen_ = exists;
    if (frozen_) {
      spdlog::warn("test hook: {} exists; the journal is frozen (nothing appended from now on "
                   "becomes durable)",
                   freeze_file_);
    } else {
      spdlog::warn("test hook: {} is gone; the journal flushes again", freeze_file_);
    }
  }
  return frozen_;
}

}  // namespace drover::server
