#include "core/model.h"

#include <charconv>

namespace drover::core {

std::string_view TaskStateName(TaskState state) {
  switch (state) {
    case TaskState::kWaiting: return "waiting";
    case TaskState::kQueued: return "queued";
    case TaskState::kAssigned: return "assigned";
    case TaskState::kRunning: return "running";
    case TaskState::kSucceeded: return "succeeded";
    case TaskState::kFailed: return "failed";
    case TaskState::kCanceled: return "canceled";
  }
  return "unknown";
}

namespace {

bool ParseInt(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

Result<ArrayRange> ParseArrayRange(std::string_view text) {
  auto bad = [&](std::string why) {
    return InvalidArgument("array \"" + std::string(text) + "\": " + why +
                           " (expected e.g. \"0-7\", \"5\" or \"0-99:2\")");
  };
  std::string_view range = text;
  int64_t step = 1;
  if (size_t colon = text.find(':'); colon != std::string_view::npos) {
    range = text.substr(0, colon);
    if (!ParseInt(text.substr(colon + 1), step) || step <= 0) return bad("bad step");
  }
  int64_t first = 0;
  int64_t last = 0;
  size_t dash = range.find('-', 1);
  if (dash == std::string_view::npos) {
    if (!ParseInt(range, first)) return bad("not a number");
    last = first;
  } else if (!ParseInt(range.substr(0, dash), first) || !ParseInt(range.substr(dash + 1), last)) {
    return bad("not a range");
  }
  if (first < 0 || last < first) return bad("indices must be >= 0 and ascending");
  int64_t count = (last - first) / step + 1;
  if (count > 100'000'000) return bad("more than 100,000,000 tasks");
  return ArrayRange{first, static_cast<uint32_t>(count), step};
}

uint64_t JobSpec::TaskCount() const {
  uint64_t n = 0;
  for (const TaskGroupSpec& g : groups) n += g.TaskCount();
  return n;
}

std::string OutputNameProblem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > 1024) return "is longer than 1024 bytes";
  if (name.front() == '/') return "is an absolute path";
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return "holds a control character";
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string_view::npos) slash = name.size();
    const std::string_view part = name.substr(start, slash - start);
    if (part.empty()) return "has an empty path part";
    if (part == "." || part == "..") return "has a \"" + std::string(part) + "\" path part";
    start = slash + 1;
  }
  return {};
}

const char* ImagePullName(ImagePull pull) {
  switch (pull) {
    case ImagePull::kAlways:
      return "always";
    case ImagePull::kNever:
      return "never";
    case ImagePull::kMissing:
      break;
  }
  return "missing";
}

std::optional<ImagePull> ParseImagePull(std::string_view name) {
  for (ImagePull p : {ImagePull::kMissing, ImagePull::kAlways, ImagePull::kNever}) {
    if (name == ImagePullName(p)) return p;
  }
  return std::nullopt;
}

std::string ImageNameProblem(std::string_view image) {
  if (image.empty()) return "is empty; expected an image such as \"docker.io/library/debian:12\"";
  if (image.size() > 255) {
    return "is " + std::to_string(image.size()) + " characters long; at most 255";
  }
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(image[0])) {
    return "\"" + std::string(image) + "\" starts with '" + std::string(1, image[0]) +
           "'; an image reference starts with a letter or digit";
  }
  for (char c : image) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-' && c != '/' && c != ':' && c != '@') {
      return "\"" + std::string(image) + "\" has a character an image reference cannot hold (" +
             (c >= ' ' && c < 127 ? "'" + std::string(1, c) + "'"
                                  : "byte " + std::to_string(static_cast<unsigned char>(c))) +
             ")";
    }
  }
  return "";
}

bool IsSha256Hex(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::vector<std::string> ExpandCommand(const std::vector<std::string>& argv, int64_t index) {
  static constexpr std::string_view kPlaceholder = "{index}";
  const std::string value = std::to_string(index);
  std::vector<std::string> out;
  out.reserve(argv.size());
  for (const std::string& arg : argv) {
    std::string s = arg;
    for (size_t pos = s.find(kPlaceholder); pos != std::string::npos;
         pos = s.find(kPlaceholder, pos + value.size())) {
      s.replace(pos, kPlaceholder.size(), value);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace drover::core
