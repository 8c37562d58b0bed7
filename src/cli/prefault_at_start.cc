// The `drover` binary's call of PrefaultStartPages (prefault.h). It lives in
// the executable, not in drover_cli: a static library's object is linked
// only when something refers to it, and nothing refers to an init_array
// entry.
#include "cli/prefault.h"

namespace {

// Priority 101, the first one a program may use: before the C++ static
// initialisers (priority 65535), which are among the writers.
[[gnu::constructor(101)]] void PrefaultAtStart() { drover::cli::PrefaultStartPages(); }

}  // namespace
