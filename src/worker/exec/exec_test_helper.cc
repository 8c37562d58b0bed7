// A task for the executor's tests, so they depend on nothing but this
// binary:
//   exec_test_helper alloc MIB       touch MIB MiB of memory, exit 0 (3 if malloc fails)
//   exec_test_helper burn SECONDS    spin on the CPU for SECONDS of wall time, print
//                                    the CPU time used in microseconds
//   exec_test_helper spew MIB        write MIB MiB to stdout
//   exec_test_helper doublefork FIFO start a grandchild in its own session,
//                                    write its pid to FIFO, then ignore
//                                    SIGTERM and wait forever
//   exec_test_helper ignoreterm FIFO ignore SIGTERM, write "ready" to FIFO, wait forever
//   exec_test_helper result BYTES    write BYTES bytes of 'r' to $DROVER_RESULT
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int Alloc(long mib) {
  for (long i = 0; i < mib; ++i) {
    char* p = static_cast<char*>(malloc(1 << 20));
    if (p == nullptr) return 3;
    memset(p, 1, 1 << 20);
  }
  return 0;
}

int Burn(double seconds) {
  const double end = Now() + seconds;
  volatile unsigned long x = 0;
  while (Now() < end) {
    for (int i = 0; i < 10000; ++i) x = x + i;
  }
  timespec cpu;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  printf("%lld\n", static_cast<long long>(cpu.tv_sec) * 1000000 + cpu.tv_nsec / 1000);
  return 0;
}

int Spew(long mib) {
  static char buf[1 << 16];
  memset(buf, 'x', sizeof buf);
  for (long i = 0; i < mib * 16; ++i) {
    if (write(1, buf, sizeof buf) != static_cast<ssize_t>(sizeof buf)) return 4;
  }
  return 0;
}

void WriteTo(const char* fifo, const std::string& text) {
  int fd = open(fifo, O_WRONLY);
  if (fd >= 0) {
    ssize_t n = write(fd, text.data(), text.size());
    (void)n;
    close(fd);
  }
}

int IgnoreTerm(const char* fifo) {
  signal(SIGTERM, SIG_IGN);
  WriteTo(fifo, "ready\n");
  for (;;) pause();
}

int DoubleFork(const char* fifo) {
  // Before anything is reported, so a TERM sent after the report is ignored.
  signal(SIGTERM, SIG_IGN);
  pid_t mid = fork();
  if (mid == 0) {
    setsid();
    pid_t grand = fork();
    if (grand == 0) {
      WriteTo(fifo, std::to_string(getpid()) + "\n");
      for (;;) pause();
    }
    _exit(0);
  }
  int status;
  waitpid(mid, &status, 0);
  for (;;) pause();
}

int Result(long bytes) {
  const char* path = getenv("DROVER_RESULT");
  if (path == nullptr) return 5;
  FILE* f = fopen(path, "w");
  if (f == nullptr) return 6;
  for (long i = 0; i < bytes; ++i) fputc('r', f);
  fclose(f);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: exec_test_helper alloc|burn|spew|doublefork|ignoreterm|result ARG\n");
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "alloc") return Alloc(atol(argv[2]));
  if (mode == "burn") return Burn(atof(argv[2]));
  if (mode == "spew") return Spew(atol(argv[2]));
  if (mode == "doublefork") return DoubleFork(argv[2]);
  if (mode == "ignoreterm") return IgnoreTerm(argv[2]);
  if (mode == "result") return Result(atol(argv[2]));
  fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
