#include "cli/upload_inputs.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "common/quantity.h"
#include "net/http_client.h"
#include "net/sha256.h"

namespace drover::cli {

Status UploadInputFiles(const net::ClientOptions& server, core::JobSpec& spec,
                        const std::string& base_dir, std::ostream& log) {
  net::HttpClient http(server);
  std::map<std::string, core::OutputFile> done;  // by path: each file once
  for (core::TaskGroupSpec& group : spec.groups) {
    std::map<std::string, std::string> names;  // name -> path, in this task
    for (core::OutputFile& f : group.input_files) {
      if (!f.sha256.empty()) continue;  // uploaded already (a JSON spec)
      const std::string path =
          f.name.front() == '/' || base_dir.empty() ? f.name : base_dir + "/" + f.name;
      const std::string shown = f.name;
      const size_t slash = path.find_last_of('/');
      const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
      if (auto [it, fresh] = names.emplace(name, shown); !fresh) {
        return InvalidArgument("input file " + shown + ": task \"" + group.name +
                               "\" already has one named \"" + name + "\" (" + it->second + ")");
      }
      if (auto known = done.find(path); known != done.end()) {
        f = known->second;
        continue;
      }
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) {
        return InvalidArgument("input file " + shown + ": " + std::strerror(errno));
      }
      if (!S_ISREG(st.st_mode)) return InvalidArgument("input file " + shown + ": not a file");
      Result<std::string> sha = net::Sha256OfFile(path);
      if (!sha.ok()) return sha.status().WithContext("input file " + shown);
      net::ClientRequest head;
      head.method = "HEAD";
      head.target = "/api/v1/files/" + *sha;
      Result<net::Response> known = http.Send(head);
      if (!known.ok()) return known.status().WithContext("input file " + shown);
      if (known->status == 404) {
        net::ClientRequest put;
        put.method = "PUT";
        put.target = "/api/v1/files/" + *sha;
        put.content_type = "application/octet-stream";
        Result<net::Response> sent = http.Upload(put, path);
        if (!sent.ok()) return sent.status().WithContext("input file " + shown);
        RETURN_IF_ERROR(net::StatusFromResponse(*sent).WithContext("input file " + shown));
        log << "uploaded " << shown << " (" << FormatBytes(static_cast<uint64_t>(st.st_size)) << ")"
            << std::endl;
      } else {
        RETURN_IF_ERROR(net::StatusFromResponse(*known).WithContext("input file " + shown));
        log << shown << ": already on the server" << std::endl;
      }
      f = core::OutputFile{name, static_cast<uint64_t>(st.st_size), *sha};
      done.emplace(path, f);
    }
  }
  return Status::Ok();
}

}  // namespace drover::cli
