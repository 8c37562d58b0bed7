#include "tests/redis/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

namespace drover::testing {
namespace {

constexpr char kReadyLine[] = "Ready to accept connections";
constexpr auto kReadyTimeout = std::chrono::seconds(20);

std::string FindRedisServer() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  dirs += ":/usr/sbin:/usr/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/redis-server";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

}  // namespace

// A port nobody listens on right now (the kernel's pick for port 0).
Result<int> FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return Internal("cannot find a free port");
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

Result<std::unique_ptr<TestRedisServer>> TestRedisServer::Start(
    std::vector<std::string> extra_args) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "drover-redis-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return Internal("mkdtemp failed");
  std::unique_ptr<TestRedisServer> server(new TestRedisServer(tmpl, std::move(extra_args)));
  // Another process may take the port between our pick and redis's bind:
  // then redis exits before it is ready, and we pick again.
  Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto port = FreePort();
    if (!port.ok()) return port.status();
    server->port_ = *port;
    last = server->Launch();
    if (last.ok()) return server;
  }
  return last;
}

Status TestRedisServer::Launch() {
  const std::string binary = FindRedisServer();
  if (binary.empty()) return Unavailable("redis-server is not installed (apt-get install redis-server)");
  std::vector<std::string> args = {binary,        "--port",     std::to_string(port_),
                                   "--bind",      "127.0.0.1",  "--save",
                                   "",            "--appendonly", "no",
                                   "--dir",       dir_,         "--daemonize",
                                   "no",          "--logfile",  ""};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Internal("pipe failed");
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Internal("fork failed");
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  pid_ = pid;
  out_fd_ = fds[0];

  // Read its log until it says it is ready, or it exits, or time is up.
  std::string log;
  const auto deadline = std::chrono::steady_clock::now() + kReadyTimeout;
  bool ready = false;
  while (!ready) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{out_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(out_fd_, buf, sizeof(buf));
    if (n <= 0) break;  // it exited
    log.append(buf, static_cast<size_t>(n));
    ready = log.find(kReadyLine) != std::string::npos;
  }
  if (!ready) {
    Kill();
    return Unavailable("redis-server on port " + std::to_string(port_) +
                       " did not become ready; its output:\n" + log);
  }
  drain_ = std::thread([fd = out_fd_] {
    char buf[4096];
    while (::read(fd, buf, sizeof(buf)) > 0) {
    }
  });
  return Status::Ok();
}

void TestRedisServer::Kill() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // The write end died with the process: the drain thread sees EOF.
  if (drain_.joinable()) drain_.join();
  if (out_fd_ >= 0) {
    ::close(out_fd_);
    out_fd_ = -1;
  }
}

Status TestRedisServer::Restart() {
  Kill();
  return Launch();
}

TestRedisServer::~TestRedisServer() {
  Kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string TestRedisServer::url(int db) const {
  return "redis://127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
}

Result<std::string> SharedTestRedisUrl() {
  if (const char* url = std::getenv("DROVER_TEST_REDIS_URL"); url && *url) return std::string(url);
  static std::unique_ptr<TestRedisServer> shared;
  static Status failed;
  if (!shared && failed.ok()) {
    auto started = TestRedisServer::Start();
    if (started.ok()) {
      shared = std::move(started).value();
    } else {
      failed = started.status();
    }
  }
  if (!failed.ok()) return failed;
  return shared->url();
}

}  // namespace drover::testing
