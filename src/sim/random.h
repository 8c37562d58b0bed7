// Random: a small deterministic random source for synthetic traces.
//
// xoshiro256** seeded through splitmix64, with our own uniform, normal
// (Box-Muller), log-normal and exponential draws. The standard library's
// distributions are deliberately not used: their output differs between
// library versions, and a synthetic trace must be the same everywhere for a
// given seed.
//
// Thread safety: none; one owner.
#ifndef DROVER_SIM_RANDOM_H_
#define DROVER_SIM_RANDOM_H_

#include <cstdint>

namespace drover::sim {

// One step of splitmix64: advances `state` and returns the next output.
uint64_t SplitMix64(uint64_t& state);

class Random {
 public:
  // The four xoshiro words are the first four splitmix64 outputs of `seed`.
  explicit Random(uint64_t seed);

  // 64 uniformly random bits (xoshiro256**).
  uint64_t Next();
  // Uniform in [0, 1), 53 bits.
  double Uniform();
  // Uniform in [0, n); n > 0. Unbiased (rejection).
  uint64_t Below(uint64_t n);
  // Standard normal by the Box-Muller transform (the second value of each
  // pair is kept for the next call).
  double Normal();
  // exp(mu + sigma * Normal()).
  double LogNormal(double mu, double sigma);
  // Exponential with the given mean.
  double Exponential(double mean);

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace drover::sim

#endif  // DROVER_SIM_RANDOM_H_
