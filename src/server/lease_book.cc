#include "server/lease_book.h"

#include <charconv>

namespace drover::server {

store::Owner LeaseBook::OwnerOf(const AttemptRef& a) const {
  return "task:" + a.task.ToString() + "#" + std::to_string(a.attempt) + "@" + server_id_;
}

std::optional<AttemptRef> LeaseBook::ParseOwner(std::string_view owner) {
  constexpr std::string_view kPrefix = "task:";
  if (owner.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  owner.remove_prefix(kPrefix.size());
  const size_t hash = owner.find('#');
  const size_t at = owner.find('@');
  if (hash == std::string_view::npos || at == std::string_view::npos || at < hash) {
    return std::nullopt;
  }
  Result<TaskId> task = ParseTaskId(owner.substr(0, hash));
  if (!task.ok()) return std::nullopt;
  std::string_view digits = owner.substr(hash + 1, at - hash - 1);
  uint32_t attempt = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), attempt);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
    return std::nullopt;
  }
  return AttemptRef{*task, attempt};
}

std::optional<TaskId> LeaseBook::TaskOfSlotKey(std::string_view key) {
  constexpr std::string_view kSlot = ":slot:";
  if (key.substr(0, 6) != "lease:") return std::nullopt;
  const size_t pos = key.find(kSlot);
  if (pos == std::string_view::npos) return std::nullopt;
  Result<TaskId> task = ParseTaskId(key.substr(pos + kSlot.size()));
  if (!task.ok()) return std::nullopt;
  return *task;
}

std::vector<store::LeaseKey> LeaseBook::StoreKeys(const std::vector<core::LeaseKey>& keys) {
  std::vector<store::LeaseKey> out;
  out.reserve(keys.size());
  for (const core::LeaseKey& k : keys) out.push_back(k.ToString());
  return out;
}

void LeaseBook::Granted(const AttemptRef& a, std::string slot_key) {
  held_[a.task] = Held{a.attempt, std::move(slot_key)};
}

std::optional<AttemptRef> LeaseBook::Freed(std::string_view key) {
  std::optional<TaskId> task = TaskOfSlotKey(key);
  if (!task) return std::nullopt;
  auto it = held_.find(*task);
  if (it == held_.end() || it->second.slot_key != key) return std::nullopt;
  AttemptRef a{*task, it->second.attempt};
  held_.erase(it);
  return a;
}

std::vector<LeaseBook::RenewBatch> LeaseBook::SplitRenew(
    const std::vector<core::LeaseKey>& keys) const {
  std::vector<RenewBatch> out;
  bool skipping = true;
  for (const core::LeaseKey& k : keys) {
    if (k.kind == core::LeaseKind::kSlot) {
      auto it = held_.find(k.task);
      skipping = it == held_.end();
      if (!skipping) out.push_back({OwnerOf({k.task, it->second.attempt}), {}});
    }
    if (!skipping) out.back().keys.push_back(k.ToString());
  }
  return out;
}

}  // namespace drover::server
