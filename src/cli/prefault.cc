#include "cli/prefault.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

// The bounds of the binary's writable data: glibc's Scrt1.o defines
// __data_start at the start of .data, the linker defines _end after .bss.
extern "C" char __data_start[];
extern "C" char _end[];

namespace drover::cli {

namespace {

// Populates [begin, end) widened to whole pages; false (errno set) when
// madvise fails.
bool PopulateWrite(std::uintptr_t begin, std::uintptr_t end, std::size_t& bytes) {
  const std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  begin &= ~(page - 1);
  end = (end + page - 1) & ~(page - 1);
  if (end <= begin) return true;
  bytes += end - begin;
  return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0;
}

}  // namespace

PrefaultReport PrefaultStartPages() {
  PrefaultReport report;
  // .data starts on the page after the RELRO segment (the linker aligns
  // its end to a page), so the range holds only writable pages.
  if (!PopulateWrite(reinterpret_cast<std::uintptr_t>(__data_start),
                     reinterpret_cast<std::uintptr_t>(_end), report.data_bytes)) {
    ++report.failures;
    report.error = errno;
  }
  // The first malloc makes the main arena's heap: the request plus
  // M_TOP_PAD (128 KiB), which a command then writes page by page. The
  // volatile keeps the compiler from dropping the malloc/free pair.
  void* volatile first = std::malloc(1);
  std::free(first);
  const std::uintptr_t heap_end = reinterpret_cast<std::uintptr_t>(sbrk(0));
  const std::size_t heap_size = mallinfo2().arena;
  if (heap_size > 0 && heap_size <= heap_end &&
      !PopulateWrite(heap_end - heap_size, heap_end, report.heap_bytes)) {
    ++report.failures;
    report.error = errno;
  }
  return report;
}

}  // namespace drover::cli
