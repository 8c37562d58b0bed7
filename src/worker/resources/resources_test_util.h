// Test helpers for the resource detection tests: a temporary directory that
// removes itself, and a writer that creates parent directories, so a test can
// build a fake /proc or /sys tree in a few lines.
//
// Thread safety: one test thread.
#ifndef DROVER_WORKER_RESOURCES_RESOURCES_TEST_UTIL_H_
#define DROVER_WORKER_RESOURCES_RESOURCES_TEST_UTIL_H_

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace drover::worker::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "drover_res_XXXXXX").string();
    char* made = mkdtemp(pattern.data());
    path_ = made != nullptr ? made : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // Writes `content` to path()/relative, creating directories; returns the
  // full path.
  std::string Write(const std::string& relative, const std::string& content,
                    bool executable = false) const {
    std::filesystem::path full = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(full.parent_path());
    {
      std::ofstream out(full, std::ios::trunc);
      out << content;
    }
    if (executable) chmod(full.c_str(), 0755);
    return full.string();
  }

  std::string MakeDir(const std::string& relative) const {
    std::filesystem::path full = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(full);
    return full.string();
  }

 private:
  std::string path_;
};

// Sets an environment variable for the life of the object, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace drover::worker::testing

#endif  // DROVER_WORKER_RESOURCES_RESOURCES_TEST_UTIL_H_
