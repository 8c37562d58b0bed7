// A task for the executor's tests, so they depend on nothing but this
// binary:
//   exec_test_helper alloc MIB       touch MIB MiB of memory, exit 0 (3 if malloc fails)
//   exec_test_helper burn SECONDS    spin on the CPU for SECONDS of wall time
//   exec_test_helper spew MIB        write MIB MiB to stdout
//   exec_test_helper doublefork FIFO start a grandchild in its own session,
//                                    write its pid to FIFO, then ignore
//                                    SIGTERM and wait forever
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

int DoubleFork(const char* fifo) {
  pid_t mid = fork();
  if (mid == 0) {
    setsid();
    pid_t grand = fork();
    if (grand == 0) {
      std::string pid = std::to_string(getpid()) + "\n";
      int fd = open(fifo, O_WRONLY);
      if (fd >= 0) {
        ssize_t n = write(fd, pid.data(), pid.size());
        (void)n;
        close(fd);
      }
      for (;;) pause();
    }
    _exit(0);
  }
  int status;
  waitpid(mid, &status, 0);
  signal(SIGTERM, SIG_IGN);
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
    fprintf(stderr, "usage: exec_test_helper alloc|burn|spew|doublefork|result ARG\n");
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "alloc") return Alloc(atol(argv[2]));
  if (mode == "burn") return Burn(atof(argv[2]));
  if (mode == "spew") return Spew(atol(argv[2]));
  if (mode == "doublefork") return DoubleFork(argv[2]);
  if (mode == "result") return Result(atol(argv[2]));
  fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
