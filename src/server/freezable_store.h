// FreezableStore: the journal-freeze test hook (DROVER_TEST_FREEZE_JOURNAL),
// kept out of the production flush path. The server shell wraps its store
// in one only when that variable is set; otherwise nothing of it exists.
//
// While the named file exists, Flush does nothing and Compact fails
// (Unavailable), so nothing appended from then on becomes durable: a test
// freezes the journal, lets the server hand out work it never journals,
// and kills it (tests/integration/recovery_test.cc). Everything else is
// forwarded to the wrapped store unchanged.
//
// Thread safety: as the wrapped store (the server's event loop).
#ifndef DROVER_SERVER_FREEZABLE_STORE_H_
#define DROVER_SERVER_FREEZABLE_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace drover::server {

class FreezableStore : public store::Store {
 public:
  FreezableStore(std::unique_ptr<store::Store> inner, std::string freeze_file)
      : inner_(std::move(inner)), freeze_file_(std::move(freeze_file)) {}

  void Subscribe(FreeListener listener, DoneCallback subscribed) override {
    inner_->Subscribe(std::move(listener), std::move(subscribed));
  }
  void Claim(std::vector<store::LeaseKey> keys, store::Owner owner, Duration ttl,
             Callback<store::ClaimOutcome> done) override {
    inner_->Claim(std::move(keys), std::move(owner), ttl, std::move(done));
  }
  void Renew(std::vector<store::LeaseKey> keys, store::Owner owner, Duration ttl,
             Callback<store::RenewOutcome> done) override {
    inner_->Renew(std::move(keys), std::move(owner), ttl, std::move(done));
  }
  void Release(std::vector<store::LeaseKey> keys, store::Owner owner,
               Callback<store::ReleaseOutcome> done) override {
    inner_->Release(std::move(keys), std::move(owner), std::move(done));
  }
  void ListLeases(Callback<std::vector<store::Lease>> done) override {
    inner_->ListLeases(std::move(done));
  }
  void TakeRecovered(Callback<store::Recovered> done) override {
    inner_->TakeRecovered(std::move(done));
  }
  void Append(std::string record, DoneCallback done) override {
    inner_->Append(std::move(record), std::move(done));
  }
  void Flush() override;
  void Compact(std::vector<std::string> snapshot, DoneCallback done) override;
  uint64_t LogBytes() const override { return inner_->LogBytes(); }

 private:
  bool Frozen();  // checks the file; logs each change
  std::unique_ptr<store::Store> inner_;
  std::string freeze_file_;
  bool frozen_ = false;
};

}  // namespace drover::server

#endif  // DROVER_SERVER_FREEZABLE_STORE_H_
