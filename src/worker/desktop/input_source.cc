// MakeInputSource (input_source.h): the spec, the file: backend and auto.
#include "worker/desktop/input_source.h"

#include <sys/stat.h>

#include <utility>

#include "common/run_program.h"
#include "worker/desktop/input_backends.h"

namespace drover::worker {
namespace {

// The file's mtime, read again on every call: a stat is cheap, and a person
// may set it back (touch -d) on purpose.
class FileInputSource final : public InputSource {
 public:
  explicit FileInputSource(std::string path) : path_(std::move(path)) {}

  std::optional<Time> LastInput() override {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) return std::nullopt;
    return TimeFromMicros(static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000 +
                          st.st_mtim.tv_nsec / 1000);
  }

  std::string Describe() const override { return "file " + path_; }

 private:
  std::string path_;
};

constexpr std::string_view kDefaultEvdevDir = "/dev/input";

}  // namespace

Result<std::unique_ptr<InputSource>> MakeInputSource(std::string_view spec, InputSourceEnv env) {
  if (env.clock == nullptr) env.clock = &SystemClock();
  if (!env.run_program) env.run_program = RunProgram;

  if (spec.starts_with("file:")) {
    std::string path(spec.substr(5));
    if (path.empty()) return InvalidArgument("input source \"file:\" needs a path: file:PATH");
    return std::unique_ptr<InputSource>(std::make_unique<FileInputSource>(std::move(path)));
  }
  if (spec == "evdev") return MakeEvdevInputSource(std::string(kDefaultEvdevDir), *env.clock);
  if (spec.starts_with("evdev:")) {
    std::string dir(spec.substr(6));
    if (dir.empty()) dir = kDefaultEvdevDir;
    return MakeEvdevInputSource(std::move(dir), *env.clock);
  }
  if (spec == "logind") return MakeLogindInputSource(std::move(env));
  if (spec == "auto") {
    Result<std::unique_ptr<InputSource>> evdev =
        MakeEvdevInputSource(std::string(kDefaultEvdevDir), *env.clock);
    if (evdev.ok()) return evdev;
    Result<std::unique_ptr<InputSource>> logind = MakeLogindInputSource(std::move(env));
    if (logind.ok()) return logind;
    return FailedPrecondition("no owner input source: " + evdev.status().message() + "; " +
                              logind.status().message());
  }
  return InvalidArgument("unknown input source \"" + std::string(spec) +
                         "\": expected file:PATH, evdev, evdev:DIR, logind or auto");
}

}  // namespace drover::worker
