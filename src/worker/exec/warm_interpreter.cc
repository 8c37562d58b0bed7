// The worker's side of a warm interpreter's socket (warm_interpreter.h).
#include "worker/exec/warm_interpreter.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace drover::worker {
namespace {

const std::string* EnvOf(const TaskSpec& spec, const char* name) {
  for (const auto& [k, v] : spec.env) {
    if (k == name) return &v;
  }
  return nullptr;
}

}  // namespace

bool WantsWarm(const TaskSpec& spec) {
  const std::string* warm = EnvOf(spec, "DROVER_WARM");
  return warm != nullptr && *warm == "1" && !spec.argv.empty();
}

std::string WarmKey(const TaskSpec& spec, const std::string& exe, uid_t uid, bool limits) {
  std::string key = std::to_string(uid);
  key += '\0';
  key += exe;
  for (const std::string& a : spec.argv) {
    key += '\0';
    key += a;
  }
  key += "\0gpus:";
  for (int g : spec.gpus) key += std::to_string(g) + ",";
  for (const char* name : {"DROVER_PRELOAD", "DROVER_MAX_CALLS"}) {
    key += '\0';
    if (const std::string* v = EnvOf(spec, name)) key += *v;
  }
  if (limits) {
    key += "\0limits:" + std::to_string(spec.memory_bytes) + "," + std::to_string(spec.max_pids);
  }
  return key;
}

Result<std::pair<UniqueFd, UniqueFd>> MakeWarmSocket() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return Unavailable(std::string("cannot make a warm interpreter's socket: ") +
                       strerror(errno));
  }
  UniqueFd mine(fds[0]);
  UniqueFd theirs(fds[1]);
  if (fcntl(mine.fd(), F_SETFL, O_NONBLOCK) != 0) {
    return Unavailable(std::string("cannot make a warm interpreter's socket: ") +
                       strerror(errno));
  }
  return std::make_pair(std::move(mine), std::move(theirs));
}

Status SendCall(int socket, const std::string& cwd, const std::vector<std::string>& environment,
                int stdout_fd, int stderr_fd, bool reply_result) {
  std::string message = cwd;
  for (const std::string& e : environment) {
    message += '\0';
    message += e;
  }
  if (reply_result) {
    message += '\0';
    message += kReplyResult;
  }
  iovec iov{message.data(), message.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  const int fds[2] = {stdout_fd, stderr_fd};
  memcpy(CMSG_DATA(c), fds, sizeof(fds));
  ssize_t n;
  do {
    n = sendmsg(socket, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    return Unavailable(std::string("cannot hand the call to its warm interpreter: ") +
                       strerror(errno));
  }
  return Status::Ok();
}

Result<WarmReply> ReadReply(int socket) {
  // The status line, then after a newline the call's result when it came
  // with the reply (the runner sends at most 64 KiB so; more goes to the
  // file).
  static thread_local std::vector<char> buf(kMaxReplyBytes + 1);
  ssize_t n;
  do {
    n = recv(socket, buf.data(), kMaxReplyBytes, MSG_TRUNC);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Unavailable("no reply yet");
  if (n <= 0) return Status(StatusCode::kAborted, "the warm interpreter closed its socket");
  if (static_cast<size_t>(n) > kMaxReplyBytes) {
    return InvalidArgument("a warm interpreter's reply is over " + std::to_string(kMaxReplyBytes) +
                           " bytes");
  }
  const std::string_view message(buf.data(), static_cast<size_t>(n));
  const size_t newline = message.find('\n');
  std::optional<std::string> result;
  if (newline != std::string_view::npos) result = std::string(message.substr(newline + 1));
  const std::string status(message.substr(0, std::min(newline, message.size())));
  if (status.size() > 200 || status.find('\0') != std::string::npos) {
    return InvalidArgument("a warm interpreter's reply does not parse: " + status.substr(0, 200));
  }
  std::istringstream in(status);
  std::string how;
  long long value = 0, cpu_us = 0, rss_kib = 0;
  int last = 0;
  if (!(in >> how >> value >> cpu_us >> rss_kib >> last) || (how != "exit" && how != "signal") ||
      cpu_us < 0 || rss_kib < 0) {
    return InvalidArgument("a warm interpreter's reply does not parse: " + status);
  }
  WarmReply r;
  if (how == "exit") {
    r.exit_code = static_cast<int>(value);
  } else {
    r.signal = static_cast<int>(value);
  }
  r.cpu = Duration(cpu_us);
  r.peak_memory = static_cast<uint64_t>(rss_kib) * 1024;
  r.last = last != 0;
  r.result = std::move(result);
  return r;
}

Status PinThreads(pid_t pid, const cpu_set_t& cpus) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return NotFound("process " + std::to_string(pid) + " is gone");
  int pinned = 0;
  int error = 0;
  while (dirent* e = readdir(d)) {
    pid_t tid = 0;
    const char* end = e->d_name + strlen(e->d_name);
    if (std::from_chars(e->d_name, end, tid).ptr != end || tid <= 0) continue;
    if (sched_setaffinity(tid, sizeof(cpus), &cpus) == 0) {
      ++pinned;
    } else {
      error = errno;
    }
  }
  closedir(d);
  if (pinned == 0) {
    return Unavailable("cannot pin process " + std::to_string(pid) + ": " + strerror(error));
  }
  return Status::Ok();
}

}  // namespace drover::worker
