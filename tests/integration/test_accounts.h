// TestAccounts: system accounts without a home, made with useradd for one
// test and deleted with userdel when it ends, failed or not. Declare it
// before the Cluster: its workers, and so the accounts' processes, end
// first.
#ifndef DROVER_TESTS_INTEGRATION_TEST_ACCOUNTS_H_
#define DROVER_TESTS_INTEGRATION_TEST_ACCOUNTS_H_

#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

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
      RunResult r = RunToEnd({kUserdel, name}, In(kStartTimeout));
      if (r.status != 0) ADD_FAILURE() << "userdel " << name << " failed:\n" << r.output;
    }
  }

 private:
  std::vector<std::string> made_;
};

inline uid_t UidOf(const std::string& name) {
  const passwd* pw = getpwnam(name.c_str());
  return pw == nullptr ? static_cast<uid_t>(-1) : pw->pw_uid;
}

}  // namespace drover::testing

#endif  // DROVER_TESTS_INTEGRATION_TEST_ACCOUNTS_H_
