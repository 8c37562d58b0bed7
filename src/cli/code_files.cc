#include "cli/code_files.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <vector>

#include "net/sha256.h"

namespace drover::cli {

Status HashCodeFiles(core::JobSpec& spec, const std::string& base_dir) {
  std::map<std::string, std::string> hashed;  // path -> sha256: each file once
  for (core::TaskGroupSpec& group : spec.groups) {
    std::vector<core::OutputFile> files;
    for (const core::OutputFile& entry : group.code) {
      if (!entry.sha256.empty()) {  // hashed already (a JSON spec)
        files.push_back(entry);
        continue;
      }
      const std::string& pattern = entry.name;
      const std::string where = "code pattern \"" + pattern + "\" of task \"" + group.name + "\"";
      const bool relative = pattern.front() != '/' && !base_dir.empty();
      const std::string full = relative ? base_dir + "/" + pattern : pattern;
      glob_t g{};
      const int rc = ::glob(full.c_str(), 0, nullptr, &g);
      std::vector<std::string> matched;
      for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) matched.emplace_back(g.gl_pathv[i]);
      ::globfree(&g);
      if (rc == GLOB_NOMATCH || (rc == 0 && matched.empty())) {
        return InvalidArgument(where + " matches no file");
      }
      if (rc != 0)
        return InvalidArgument(where + ": cannot be expanded (glob error " + std::to_string(rc) +
                               ")");
      const size_t before = files.size();
      for (const std::string& path : matched) {
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;  // a directory
        auto known = hashed.find(path);
        if (known == hashed.end()) {
          Result<std::string> sha = net::Sha256OfFile(path);
          if (!sha.ok()) return sha.status().WithContext(where);
          known = hashed.emplace(path, *sha).first;
        }
        // Named as the job file names it: the same tree elsewhere gives the same key.
        const std::string shown = relative ? path.substr(base_dir.size() + 1) : path;
        files.push_back(core::OutputFile{shown, 0, known->second});
      }
      if (files.size() == before)
        return InvalidArgument(where + " matches no file (only directories)");
    }
    std::sort(files.begin(), files.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    files.erase(std::unique(files.begin(), files.end(),
                            [](const auto& a, const auto& b) { return a.name == b.name; }),
                files.end());
    group.code = std::move(files);
  }
  return Status::Ok();
}

}  // namespace drover::cli
