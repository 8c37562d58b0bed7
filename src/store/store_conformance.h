// The Store conformance suite: the behaviour every Store must show, written
// once as a value-parameterised GoogleTest suite over a harness factory, so
// the MemoryStore and the RedisStore run the very same tests.
//
// To run it on a store, link the `drover_store_conformance` object library
// into a test binary and instantiate the suite there:
//
//   #include "store/store_conformance.h"
//   INSTANTIATE_TEST_SUITE_P(Redis, StoreConformanceTest,
//       ::testing::Values(StoreConformanceParam{"redis", [] { return MakeRedisHarness(); }}),
//       StoreConformanceParamName);
//
// The harness hides how a store's time passes and how its I/O runs: the
// memory store moves a SimulatedClock; a Redis store runs its event loop in
// real time (so its ttl() should be short, e.g. 500 ms).
//
// Thread safety: test-only; one test thread.
#ifndef DROVER_STORE_STORE_CONFORMANCE_H_
#define DROVER_STORE_STORE_CONFORMANCE_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "store/store.h"

namespace drover::store {

class StoreHarness {
 public:
  virtual ~StoreHarness() = default;

  // The store under test; valid until the next Restart().
  virtual Store& store() = 0;

  // The lease TTL the tests use; the suite waits in fractions and multiples
  // of it, with margins of at least a quarter of it.
  virtual Duration ttl() const = 0;

  // Lets `d` of the store's time pass (running its I/O meanwhile), so that
  // leases due by then expire and their free events are delivered.
  virtual void Pass(Duration d) = 0;

  // Runs the store's I/O until `done()` holds or a generous timeout passes;
  // returns done(). A store that completes synchronously just returns done().
  virtual bool RunUntil(const std::function<bool()>& done) = 0;

  // Whether records and leases outlive the store object (Restart works).
  virtual bool durable() const = 0;

  // Drops the store, as a server restart would (nothing is flushed first),
  // and opens a new one on the same durable state.
  virtual Status Restart() = 0;
};

struct StoreConformanceParam {
  std::string name;  // a valid test-name suffix: letters, digits, '_'
  std::function<std::unique_ptr<StoreHarness>()> make;
};

// Prints the param as its name in test failure messages.
void PrintTo(const StoreConformanceParam& param, std::ostream* os);

std::string StoreConformanceParamName(const ::testing::TestParamInfo<StoreConformanceParam>& info);

// The fixture: synchronous wrappers that issue a call and run the harness
// until its callback has run.
class StoreConformanceTest : public ::testing::TestWithParam<StoreConformanceParam> {
 protected:
  void SetUp() override;

  Store& store() { return harness_->store(); }
  Duration ttl() const { return harness_->ttl(); }

  Result<ClaimOutcome> Claim(std::vector<LeaseKey> keys, const Owner& owner);
  Result<ClaimOutcome> Claim(std::vector<LeaseKey> keys, const Owner& owner, Duration ttl);
  Result<RenewOutcome> Renew(std::vector<LeaseKey> keys, const Owner& owner);
  Result<ReleaseOutcome> Release(std::vector<LeaseKey> keys, const Owner& owner);
  Result<std::vector<Lease>> List();
  // The keys of List(), with their owners, as "key=owner".
  std::vector<std::string> Holdings();
  Result<Recovered> TakeRecovered();
  // Appends each record, flushes, and returns each callback's status.
  std::vector<Status> AppendAndFlush(const std::vector<std::string>& records);
  Status Compact(std::vector<std::string> snapshot);
  // Subscribes a listener that records every free event into `frees_`.
  void SubscribeRecorder();

  std::unique_ptr<StoreHarness> harness_;
  std::vector<FreeEvent> frees_;

 private:
  template <typename T>
  Result<T> Await(const std::function<void(Store::Callback<T>)>& call);
};

}  // namespace drover::store

#endif  // DROVER_STORE_STORE_CONFORMANCE_H_
