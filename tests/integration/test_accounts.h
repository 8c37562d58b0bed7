// TestAccounts: system accounts without a home, made with useradd for one
// test and deleted with userdel when it ends, failed or not. Declare it
// before the Cluster: its workers, and so the accounts' processes, end
// first. A worker killed with SIGKILL leaves the ending of its tasks (and
// of its warm interpreters) to its reaper, after the worker is gone: the
// accounts go once no process runs as them, and a process still there
// after kStartTimeout is a test failure (a leak), named.
#ifndef DROVER_TESTS_INTEGRATION_TEST_ACCOUNTS_H_
#define DROVER_TESTS_INTEGRATION_TEST_ACCOUNTS_H_

#include <dirent.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "cluster.h"

namespace drover::testing {

inline constexpr const char* kUseradd = "/usr/sbin/useradd";
inline constexpr const char* kUserdel = "/usr/sbin/userdel";

// Whether accounts can be made here (root, with useradd and userdel).
inline bool CanMakeAccounts() {
  return geteuid() == 0 && access(kUseradd, X_OK) == 0 && access(kUserdel, X_OK) == 0;
}

inline uid_t UidOf(const std::string& name) {
  const passwd* pw = getpwnam(name.c_str());
  return pw == nullptr ? static_cast<uid_t>(-1) : pw->pw_uid;
}

class TestAccounts {
 public:
  // Adds each name; false (and a test failure) when one cannot be made.
  bool Add(const std::vector<std::string>& names) {
    for (const std::string& name : names) {
      RunResult r =
          RunToEnd({kUseradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name},
                   In(kStartTimeout));
      if (r.status != 0) {
        ADD_FAILURE() << "useradd " << name << " failed:\n" << r.output;
        return false;
      }
      made_.push_back(name);
    }
    return true;
  }
  ~TestAccounts() {
    for (const std::string& name : made_) {
      const uid_t uid = UidOf(name);
      const Deadline deadline = In(kStartTimeout);
      std::vector<pid_t> left;
      while (!(left = ProcessesOf(uid)).empty() && std::chrono::steady_clock::now() < deadline) {
        sched_yield();
      }
      for (pid_t pid : left)
        ADD_FAILURE() << "process " << pid << " of " << name << " outlived the test";
      RunResult r = RunToEnd({kUserdel, name}, In(kStartTimeout));
      if (r.status != 0) ADD_FAILURE() << "userdel " << name << " failed:\n" << r.output;
    }
  }

 private:
  // The processes (zombies left out) whose real uid is `uid`.
  static std::vector<pid_t> ProcessesOf(uid_t uid) {
    std::vector<pid_t> found;
    DIR* d = opendir("/proc");
    if (d == nullptr) return found;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      std::ifstream status(std::string("/proc/") + e->d_name + "/status");
      bool zombie = false;
      for (std::string line; std::getline(status, line);) {
        if (line.rfind("State:", 0) == 0) zombie = line.find('Z') != std::string::npos;
        if (line.rfind("Uid:", 0) == 0) {
          if (!zombie && std::stoul(line.substr(4)) == uid) found.push_back(std::stoi(e->d_name));
          break;
        }
      }
    }
    closedir(d);
    return found;
  }

  std::vector<std::string> made_;
};

}  // namespace drover::testing

#endif  // DROVER_TESTS_INTEGRATION_TEST_ACCOUNTS_H_
