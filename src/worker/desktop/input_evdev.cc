// The evdev backend of InputSource (input_source.h): /dev/input/event*,
// read without grabbing.
#include <dirent.h>
#include <fcntl.h>
#include <linux/input.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "common/unique_fd.h"
#include "worker/desktop/input_backends.h"
#include "worker/desktop/input_source.h"

namespace drover::worker {
namespace {

constexpr size_t kEventSize = sizeof(input_event);
static_assert(kEventSize == 24, "LatestEvdevInput reads the 64-bit struct input_event");

// How often LastInput() looks for devices that appeared since: a KVM switch
// or a replugged keyboard makes new event* nodes, and the owner's typing
// there must not go unseen for long.
constexpr Duration kRescanEvery = Seconds(2);

class EvdevInputSource final : public InputSource {
 public:
  EvdevInputSource(std::string dir, const Clock& clock) : dir_(std::move(dir)), clock_(clock) {}

  // Opens the event* devices of dir_ that are not open yet. The error (as
  // MakeInputSource documents it) when none is open afterwards.
  Status Scan();

  std::optional<Time> LastInput() override;

  std::string Describe() const override {
    return dir_ + " (" + std::to_string(devices_.size()) +
           (devices_.size() == 1 ? " device)" : " devices)");
  }

 private:
  struct Device {
    std::string name;
    UniqueFd fd;
    // The start of a record a read cut in two. A real device returns whole
    // records only; a FIFO standing in for one (tests) may not.
    std::array<char, kEventSize> partial{};
    size_t partial_size = 0;
  };

  // Reads what is pending into latest_. False when the device is gone
  // (unplugged: ENODEV) or broken.
  bool Drain(Device& device);

  std::string dir_;
  const Clock& clock_;
  std::vector<Device> devices_;
  std::optional<Time> latest_;
  Time last_scan_{};
};

Status EvdevInputSource::Scan() {
  last_scan_ = clock_.Now();
  DIR* listing = ::opendir(dir_.c_str());
  if (listing == nullptr) {
    return NotFound("evdev: cannot list " + dir_ + ": " + std::strerror(errno));
  }
  size_t candidates = 0;
  size_t denied = 0;
  std::string first_error;
  while (const dirent* entry = ::readdir(listing)) {
    std::string_view name = entry->d_name;
    if (!name.starts_with("event")) continue;
    ++candidates;
    bool open_already = false;
    for (const Device& d : devices_) open_already = open_already || d.name == name;
    if (open_already) continue;
    const std::string path = dir_ + "/" + std::string(name);
    // No EVIOCGRAB: the desktop keeps getting every event.
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EACCES || errno == EPERM) ++denied;
      if (first_error.empty()) first_error = std::string(name) + ": " + std::strerror(errno);
      continue;
    }
    devices_.push_back(Device{std::string(name), std::move(fd)});
  }
  ::closedir(listing);
  if (!devices_.empty()) return Status::Ok();
  if (candidates == 0) return NotFound("evdev: no event devices in " + dir_);
  std::string why = "evdev: cannot open any of the " + std::to_string(candidates) +
                    " event devices in " + dir_ + " (" + first_error + ")";
  if (denied == candidates) {
    return PermissionDenied(why + ": run the worker as root or in the input group");
  }
  return FailedPrecondition(why);
}

bool EvdevInputSource::Drain(Device& device) {
  std::array<char, kEventSize * 64> buffer;
  for (;;) {
    const size_t kept = device.partial_size;
    std::memcpy(buffer.data(), device.partial.data(), kept);
    const ssize_t n = ::read(device.fd.fd(), buffer.data() + kept, buffer.size() - kept);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN;
    }
    // 0: a FIFO with no writer; a device never says end of file.
    if (n == 0) return true;
    const size_t total = kept + static_cast<size_t>(n);
    const size_t whole = total - total % kEventSize;
    std::optional<Time> seen = LatestEvdevInput(std::string_view(buffer.data(), whole));
    if (seen && (!latest_ || *seen > *latest_)) latest_ = seen;
    device.partial_size = total - whole;
    std::memcpy(device.partial.data(), buffer.data() + whole, device.partial_size);
    // A short read emptied the queue: no need for the read that says EAGAIN.
    if (total < buffer.size()) return true;
  }
}

std::optional<Time> EvdevInputSource::LastInput() {
  const Time now = clock_.Now();
  // A clock set backwards looks again at once rather than never.
  if (now - last_scan_ >= kRescanEvery || now < last_scan_) {
    // Only what appeared since matters here; an error just means none did.
    (void)Scan();
  }
  std::erase_if(devices_, [this](Device& d) { return !Drain(d); });
  return latest_;
}

}  // namespace

std::optional<Time> LatestEvdevInput(std::string_view bytes) {
  std::optional<Time> latest;
  for (size_t at = 0; at + kEventSize <= bytes.size(); at += kEventSize) {
    input_event event;
    std::memcpy(&event, bytes.data() + at, kEventSize);
    if (event.type != EV_KEY && event.type != EV_REL && event.type != EV_ABS) continue;
    const Time t = TimeFromMicros(static_cast<int64_t>(event.input_event_sec) * 1'000'000 +
                                  static_cast<int64_t>(event.input_event_usec));
    if (!latest || t > *latest) latest = t;
  }
  return latest;
}

Result<std::unique_ptr<InputSource>> MakeEvdevInputSource(std::string dir, const Clock& clock) {
  auto source = std::make_unique<EvdevInputSource>(std::move(dir), clock);
  RETURN_IF_ERROR(source->Scan());
  return std::unique_ptr<InputSource>(std::move(source));
}

}  // namespace drover::worker
