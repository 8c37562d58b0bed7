#include "worker/exec/workdir_access.h"

#include <pwd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace drover::worker {

namespace {

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string OwnerName(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return "uid " + std::to_string(uid);
}

// Whether `account` (null: any account but root, and so only the bits for
// others) may search the directory `st` describes.
bool Passes(const struct stat& st, const UserSwitch* account) {
  if (account == nullptr) return (st.st_mode & S_IXOTH) != 0;
  if (account->uid == 0) return true;
  if (st.st_uid == account->uid) return (st.st_mode & S_IXUSR) != 0;
  const bool in_group =
      st.st_gid == account->gid ||
      std::find(account->groups.begin(), account->groups.end(), st.st_gid) != account->groups.end();
  if (in_group) return (st.st_mode & S_IXGRP) != 0;
  return (st.st_mode & S_IXOTH) != 0;
}

}  // namespace

Result<WorkdirFix> CheckWorkdirReachable(const std::string& workdir,
                                         const UserSwitch* account, bool fix) {
  if (workdir.empty() || workdir[0] != '/') {
    return InvalidArgument("--workdir " + workdir + ": expected an absolute path");
  }
  const std::string who = account == nullptr ? "tasks run as other accounts"
                                             : "tasks run as uid " + std::to_string(account->uid);
  // "/", then each prefix ending before a '/', then the work directory.
  std::vector<std::string> path{"/"};
  for (size_t slash = workdir.find('/', 1); slash != std::string::npos;
       slash = workdir.find('/', slash + 1)) {
    path.push_back(workdir.substr(0, slash));
  }
  if (workdir != "/") path.push_back(workdir);
  WorkdirFix out;
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string& dir = path[i];
    struct stat st {};
    if (stat(dir.c_str(), &st) != 0) {
      if (errno == ENOENT) break;  // made by the worker, passable
      return Unavailable("cannot look at " + dir + " on the way to --workdir " + workdir + ": " +
                         std::strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
      return FailedPrecondition("--workdir " + workdir + ": " + dir + " is not a directory");
    }
    if (Passes(st, account)) continue;
    const bool own = i + 1 == path.size();
    if (own) {
      // The worker's own directory: give it the bit the tasks need.
      const mode_t wanted = (st.st_mode & 07777) | S_IXUSR | S_IXGRP | S_IXOTH;
      const std::string change = " the search bit for other accounts (mode " +
                                 Octal(st.st_mode) + " -> " + Octal(wanted) + ")";
      if (!fix) {
        out.note = "would give " + dir + change;
        continue;
      }
      if (chmod(dir.c_str(), wanted) != 0) {
        return Unavailable("cannot give --workdir " + dir + change + ": " +
                           std::strerror(errno));
      }
      out.note = "gave " + dir + change;
      continue;
    }
    return FailedPrecondition(who + " cannot reach --workdir " + workdir + ": " + dir +
                              " (mode " + Octal(st.st_mode) + ", owner " + OwnerName(st.st_uid) +
                              ") does not let them pass; give them its search bit (chmod o+x " +
                              dir + ") or choose a --workdir they can reach");
  }
  return out;
}

}  // namespace drover::worker
