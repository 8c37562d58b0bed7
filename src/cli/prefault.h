// Start-up prefaulting for the `drover` binary: one madvise per region
// instead of one page fault per page.
//
// Every `drover` command is a fresh process, and on the VMs it runs on a
// page fault costs ~13-50 us of CPU while the same page filled by
// MADV_POPULATE_WRITE costs ~1 us (bench/README.md, "B4 through the CLI").
// A command writes to nearly every page of the binary's own .data and
// .bss (static initialisers, the locale, OpenSSL's capability words,
// CLI11) and to the first pages of the heap, one fault each.
// PrefaultStartPages fills those regions at once; the binary calls it
// before the C++ static initialisers run (prefault_at_start.cc, an
// init_array entry of priority 101), so those faults do not happen.
//
// It changes no data: the pages are populated as if written, and .data's
// keep their contents (a private copy is made, as the first write would).
// When the kernel lacks MADV_POPULATE_WRITE (before Linux 5.14) or a range
// cannot be populated, the pages are simply faulted in later as before.
//
// Thread safety: call while the process has one thread (the binary does,
// before main): it reads the heap's bounds with sbrk and mallinfo2.
#ifndef DROVER_CLI_PREFAULT_H_
#define DROVER_CLI_PREFAULT_H_

#include <cstddef>

namespace drover::cli {

// What PrefaultStartPages did, for tests and benchmarks: the bytes it
// asked the kernel to populate and how many madvise calls failed.
struct PrefaultReport {
  std::size_t data_bytes = 0;  // .data and .bss
  std::size_t heap_bytes = 0;  // the heap the first malloc made
  int failures = 0;
  int error = 0;  // errno of the last failed madvise (EINVAL: no such advice)
};

// Populates the calling binary's .data and .bss and the main arena's heap
// for writing (the heap is made first if no malloc has run yet). Calling it
// again is harmless: populated pages are skipped.
PrefaultReport PrefaultStartPages();

}  // namespace drover::cli

#endif  // DROVER_CLI_PREFAULT_H_
