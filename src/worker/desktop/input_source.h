// InputSource: when the machine's owner last used its keyboard or mouse.
//
// `drover worker --desktop` offers work only while the owner is away; the
// agent polls LastInput() every ~20 ms and compares it with its own clock.
// Three backends, chosen by a spec string (--desktop-input):
//
//   file:PATH    the file's mtime is the last input: `touch PATH` is input,
//                a missing file is none yet. For tests and for people who
//                script presence.
//   evdev[:DIR]  every event* device in DIR (/dev/input), opened read-only
//                and non-blocking, never grabbed (the desktop still gets
//                every event); each LastInput() drains what is pending and
//                keeps the latest key, button, motion or absolute event's
//                own kernel timestamp (CLOCK_REALTIME, evdev's default).
//                Needs read access to the devices: root or the `input`
//                group. Devices that appear later (a KVM switch, a USB
//                mouse) are opened at the next look at DIR, at most every
//                2 s; those that go away are closed.
//   logind       the idle hint of logind's graphical sessions (x11,
//                wayland, mir), asked of `loginctl` at most once a second:
//                an active session that is not idle means input now; an
//                idle one (or one on another VT) gives its IdleSinceHint.
//                Coarser than evdev: a desktop sets the hint only after its
//                own idle delay (minutes), so input seems to last that long.
//   auto         evdev if a device opens, else logind if it answers.
//
// LastInput() never goes backwards for evdev and logind: it is the latest
// input seen so far. For file: it is the file's mtime as it is now.
//
// Thread safety: a source belongs to one thread. The parsers are pure.
#ifndef DROVER_WORKER_DESKTOP_INPUT_SOURCE_H_
#define DROVER_WORKER_DESKTOP_INPUT_SOURCE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace drover::worker {

// Where the owner's latest keyboard/mouse input time comes from.
class InputSource {
 public:
  InputSource() = default;
  InputSource(const InputSource&) = delete;
  InputSource& operator=(const InputSource&) = delete;
  virtual ~InputSource() = default;

  // The latest input seen so far, as wall-clock time (nullopt: none seen
  // yet). Cheap enough for every ~20 ms: a stat, a few non-blocking reads,
  // or (logind) the cached answer; loginctl runs at most once a second and
  // blocks while it runs (a few milliseconds a run, 500 ms at most). Never fails: a
  // device that breaks is dropped, a failed loginctl keeps the last answer
  // (Describe() says why).
  virtual std::optional<Time> LastInput() = 0;

  // For logs and `drover workers`: "file /tmp/owner", "/dev/input (3
  // devices)", "logind session 4".
  virtual std::string Describe() const = 0;
};

// What a source needs from outside; tests put fakes here.
struct InputSourceEnv {
  // Paces logind's queries and evdev's look for new devices, and is "now"
  // for a logind session that is not idle. Null: the system clock. Must outlive
  // the source.
  const Clock* clock = nullptr;
  // Runs loginctl. Empty: RunProgram (common/run_program.h).
  std::function<Result<std::string>(const std::vector<std::string>& argv, Duration timeout)>
      run_program;
};

// A source from its spec (see the top of this file). Errors:
//   InvalidArgument    an unknown spec, or "file:" without a path;
//   NotFound           evdev: DIR cannot be listed or has no event device;
//                      logind: loginctl is not installed, or no session;
//   PermissionDenied   evdev: no device could be opened for lack of rights
//                      (the message says: root or the input group);
//   FailedPrecondition evdev: no device opened for another reason; logind:
//                      loginctl failed or printed what cannot be read;
//                      auto: neither, with both reasons.
// Every message names the backend and the directory or command.
Result<std::unique_ptr<InputSource>> MakeInputSource(std::string_view spec,
                                                     InputSourceEnv env = {});

// The latest timestamp among the whole struct input_event records in
// `bytes` (the 64-bit layout: struct timeval, then type, code, value; 24
// bytes), counting only EV_KEY, EV_REL and EV_ABS (not EV_SYN, EV_MSC...).
// A trailing partial record is ignored; nullopt when no record counts.
std::optional<Time> LatestEvdevInput(std::string_view bytes);

// One session as `loginctl show-session ID -p IdleHint -p IdleSinceHint
// -p Type -p Active` prints it.
struct LogindIdle {
  bool idle = false;               // IdleHint=yes
  std::optional<Time> idle_since;  // IdleSinceHint (µs since the epoch); 0 reads as none
  std::string type;                // "x11", "wayland", "tty"...
  bool active = false;             // Active=yes: in the foreground of its seat
};

// Parses KEY=VALUE lines; blank lines and other keys are skipped. An
// InvalidArgument names the line when it has no '=', a yes/no field holds
// something else or IdleSinceHint is not a number, and says so when there
// is no IdleHint line.
Result<LogindIdle> ParseLogindSession(std::string_view text);

}  // namespace drover::worker

#endif  // DROVER_WORKER_DESKTOP_INPUT_SOURCE_H_
