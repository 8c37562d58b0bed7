#include "lan.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>

#include "../integration/process.h"

namespace drover::testing {
namespace {

const std::map<std::string, std::string> kAddresses = {
    {"srv", "10.213.0.10"}, {"w1", "10.213.0.11"},  {"w2", "10.213.0.12"},
    {"w3", "10.213.0.13"},  {"rds", "10.213.0.20"}, {"cli", "10.213.0.30"}};

std::string Joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

std::string FindCommand(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  dirs += ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream in(dirs);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

Status RunCommand(std::vector<std::string> argv, std::chrono::seconds timeout) {
  const std::string line = Joined(argv);
  argv[0] = FindCommand(argv[0]);
  if (argv[0].empty()) return NotFound(line + ": command not found");
  RunResult r = RunToEnd(argv, In(timeout));
  if (r.status != 0) {
    return Unavailable(line + ": exit " + std::to_string(r.status) + ": " + r.output);
  }
  return Status::Ok();
}

Lan::Lan() : prefix_("drmh" + std::to_string(getpid())) {
  const std::string sw = prefix_ + "-sw";
  auto step = [this](std::vector<std::string> argv) {
    if (!error_.empty()) return;
    Status s = Run(std::move(argv));
    if (!s.ok()) error_ = s.ToString();
  };
  step({"ip", "netns", "add", sw});
  if (error_.empty()) made_.push_back(sw);
  step({"ip", "-n", sw, "link", "add", "br0", "type", "bridge"});
  step({"ip", "-n", sw, "link", "set", "br0", "up"});
  for (const std::string& host : kLanHosts) {
    const std::string ns = Netns(host);
    step({"ip", "netns", "add", ns});
    if (error_.empty()) made_.push_back(ns);
    step({"ip", "-n", sw, "link", "add", "v-" + host, "type", "veth", "peer", "name", "eth0",
          "netns", ns});
    step({"ip", "-n", sw, "link", "set", "v-" + host, "master", "br0", "up"});
    step({"ip", "-n", ns, "addr", "add", Address(host) + "/24", "brd", "+", "dev", "eth0"});
    step({"ip", "-n", ns, "link", "set", "eth0", "up"});
    step({"ip", "-n", ns, "link", "set", "lo", "up"});
  }
}

Lan::~Lan() {
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
    (void)Run({"ip", "netns", "del", *it});
  }
}

std::string Lan::Netns(const std::string& host) const { return prefix_ + "-" + host; }

std::string Lan::Address(const std::string& host) { return kAddresses.at(host); }

std::vector<std::string> Lan::Exec(const std::string& host, std::vector<std::string> argv) const {
  std::vector<std::string> out = {FindCommand("ip"), "netns", "exec", Netns(host)};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

Status Lan::SetLink(const std::string& host, bool up) {
  return Run({"ip", "-n", prefix_ + "-sw", "link", "set", "v-" + host, up ? "up" : "down"});
}

Status Lan::CutRoute(const std::string& from, const std::string& to) {
  return Run({"ip", "-n", Netns(from), "route", "add", "unreachable", Address(to) + "/32"});
}

Status Lan::Netem(const std::string& host, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"tc", "qdisc", "replace", "dev", "eth0", "root", "netem"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(Exec(host, argv));
}

Status Lan::Run(std::vector<std::string> argv) { return RunCommand(std::move(argv)); }

void Lan::RemoveLeftovers() {
  DIR* dir = opendir("/run/netns");
  if (dir == nullptr) return;
  const std::regex mine("^drmh([0-9]+)-[a-z0-9]+$");
  std::vector<std::string> stale;
  while (dirent* e = readdir(dir)) {
    std::cmatch m;
    const std::string name = e->d_name;
    if (!std::regex_match(name.c_str(), m, mine)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(m[1]));
    if (pid == getpid()) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(name);
  }
  closedir(dir);
  for (const std::string& ns : stale) {
    // Its processes (a server, workers) outlived the test that started them.
    RunResult pids =
        RunToEnd({FindCommand("ip"), "netns", "pids", ns}, In(std::chrono::seconds(10)));
    std::stringstream in(pids.output);
    for (std::string pid; in >> pid;) {
      if (pid.find_first_not_of("0123456789") == std::string::npos) kill(std::stoi(pid), SIGKILL);
    }
    Status s = RunCommand({"ip", "netns", "del", ns});
    std::printf("multihost: removed namespace %s left by a dead run%s%s\n", ns.c_str(),
                s.ok() ? "" : ": ", s.ok() ? "" : s.ToString().c_str());
  }
}

EnterNetns::EnterNetns(const std::string& netns) {
  home_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  const int fd = open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
  if (home_ >= 0 && fd >= 0) entered_ = setns(fd, CLONE_NEWNET) == 0;
  if (fd >= 0) close(fd);
}

EnterNetns::~EnterNetns() {
  if (entered_) (void)setns(home_, CLONE_NEWNET);
  if (home_ >= 0) close(home_);
}

}  // namespace drover::testing
