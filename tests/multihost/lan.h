// Lan: several "hosts" on this one machine, for tests of Drover across a
// real network (docs/lan.md). Each host is a network namespace
// with one veth link to a Linux bridge that lives in a switch namespace of
// its own, so nothing (no address, no link, no route) is added to the
// machine's own namespace and tearing down is deleting the namespaces:
//
//     <p>-sw:   br0 ── v-srv ── v-w1 ── v-w2 ── v-w3 ── v-rds ── v-cli
//                        │        │       │       │       │        │
//     hosts:  <p>-srv   <p>-w1  <p>-w2  <p>-w3  <p>-rds  <p>-cli   (eth0 each)
//             10.213.0.10  .11     .12     .13     .20      .30    /24
//
// <p> is "drmh<pid>", unique per test process. Leftovers of a test process
// that died without its destructors (SIGKILL, a crash) are removed by
// RemoveLeftovers(), which main() calls first: namespaces named drmh<pid>-*
// whose pid is no longer alive.
//
// Processes run in a host with `ip netns exec` (argv from Exec()). Faults:
// SetLink (the switch side of a host's veth, like pulling its cable),
// CutRoute (one host cannot reach another) and Netem (tc qdisc netem on the
// host's eth0).
//
// Thread safety: the test's thread.
#ifndef DROVER_TESTS_MULTIHOST_LAN_H_
#define DROVER_TESTS_MULTIHOST_LAN_H_

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace drover::testing {

// The hosts every Lan has, by short name.
inline const std::vector<std::string> kLanHosts = {"srv", "w1", "w2", "w3", "rds", "cli"};

class Lan {
 public:
  // Builds the switch and the hosts. On failure ok() is false and error()
  // says which command failed and what it printed; what was built is
  // removed by the destructor.
  Lan();
  ~Lan();
  Lan(const Lan&) = delete;
  Lan& operator=(const Lan&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  // The namespace of host `host` ("w1" -> "drmh123-w1").
  std::string Netns(const std::string& host) const;
  // Its address ("10.213.0.11").
  static std::string Address(const std::string& host);

  // `ip netns exec <ns> argv...` (argv[0] may be a bare command name).
  std::vector<std::string> Exec(const std::string& host, std::vector<std::string> argv) const;

  // Pulls (false) or plugs (true) the host's cable: the switch end of its
  // veth goes down or up.
  Status SetLink(const std::string& host, bool up);

  // Host `from` can no longer reach host `to` (and only that): a route
  // `unreachable <to's address>/32` in `from`, so its connects fail at once
  // with "No route to host". Every other path, the server's included, stays.
  Status CutRoute(const std::string& from, const std::string& to);

  // `tc qdisc replace dev eth0 root netem ARGS` in the host. Fails with
  // kUnavailable (holding tc's message) where the kernel has no netem.
  Status Netem(const std::string& host, const std::vector<std::string>& args);

  // Removes namespaces left by dead test processes (see above).
  static void RemoveLeftovers();

 private:
  Status Run(std::vector<std::string> argv);

  std::string prefix_;
  std::vector<std::string> made_;  // namespaces created, deleted in reverse
  std::string error_;
};

// Runs `argv` (argv[0] looked up on PATH) to the end; an error naming the
// command and holding its output when it exits non-zero.
Status RunCommand(std::vector<std::string> argv,
                  std::chrono::seconds timeout = std::chrono::seconds(30));

// The absolute path of a command on PATH; empty when missing.
std::string FindCommand(const std::string& name);

// Puts the calling thread into a host's network namespace and back to the
// one it came from on destruction. Threads started meanwhile (an EventTap)
// inherit it, so the test talks to the cluster as a client on that host.
class EnterNetns {
 public:
  explicit EnterNetns(const std::string& netns);
  ~EnterNetns();
  EnterNetns(const EnterNetns&) = delete;
  EnterNetns& operator=(const EnterNetns&) = delete;
  bool ok() const { return entered_; }

 private:
  int home_ = -1;
  bool entered_ = false;
};

}  // namespace drover::testing

#endif  // DROVER_TESTS_MULTIHOST_LAN_H_
