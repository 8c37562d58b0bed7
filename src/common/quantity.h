// Parsing and formatting of the quantities people write in job files and on
// the command line.
//
//   cpus      "2", "0.5", "500m"            -> milli-cpus   (2000, 500, 500)
//   memory    "512MiB", "4GiB", "4GB", "1024" -> bytes
//   gpus      "1", "0.25"                    -> hundredths   (100, 25)
//   duration  "90s", "2h", "1d", "1h30m", "250ms" -> Duration
//
// Memory units, decided once for all of Drover:
//   - binary:  KiB MiB GiB TiB (also Ki Mi Gi Ti) are powers of 1024;
//   - decimal: kB/KB MB GB TB are powers of 1000, as SI says;
//   - a bare number or "B" is bytes;
//   - a bare letter ("4G", "512M") is rejected as ambiguous, because tools
//     disagree on it (Slurm and Docker read GiB, Kubernetes reads 10^9); the
//     error suggests both spellings.
//
// Every error names the offending text and says what would be accepted.
// Thread safety: pure functions.
#ifndef DROVER_COMMON_QUANTITY_H_
#define DROVER_COMMON_QUANTITY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/time.h"

namespace drover {

// Binary byte units, for code and tests that write sizes.
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// Milli-cpus. At most 3 decimals ("0.001"); "500m" is 500 milli-cpus.
Result<int64_t> ParseCpus(std::string_view text);
// Bytes; see the unit rules above.
Result<uint64_t> ParseBytes(std::string_view text);
// Hundredths of a GPU. At most 2 decimals; fractions above 1 must be whole
// numbers of GPUs ("1.5" is rejected: a share spans one GPU only).
Result<int64_t> ParseGpus(std::string_view text);
// One or more <number><unit> groups, units ms s m h d; "0" alone is zero.
Result<Duration> ParseDuration(std::string_view text);

// "2", "0.5", "0.125".
std::string FormatCpus(int64_t milli);
// "512 MiB", "4 GiB", "1.5 GiB", "100 B".
std::string FormatBytes(uint64_t bytes);
// "1", "0.25".
std::string FormatGpus(int64_t hundredths);
// "2h", "1h30m", "90ms", "1d2h", "0s".
std::string FormatDuration(Duration d);

}  // namespace drover

#endif  // DROVER_COMMON_QUANTITY_H_
