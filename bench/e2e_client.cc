// e2e_client: the client half of bench/e2e (shared BENCH.md, B2-B4). The
// script starts the cluster and runs the baselines; this binary talks to the
// cluster through its public API only (the access file, REST, the event
// stream), so what it measures is what any client sees.
//
//   e2e_client job ACCESS SPEC_JSON
//       POST the job, follow its event stream until every task is terminal;
//       prints {"job","tasks","succeeded","wall_s"} (wall: from just before
//       the POST, on a keep-alive connection opened before, to the last
//       terminal event).
//   e2e_client post ACCESS SPEC_JSON [COUNT]
//       POST the job COUNT times (default 1) on one keep-alive connection
//       and return at once: bench/scale's submission (its fake workers say
//       when the tasks are done); prints {"first_job","last_job","count",
//       "submit_s"}.
//   e2e_client get ACCESS TARGET
//       GET TARGET ("/api/v1/status") and print its JSON on one line.
//   e2e_client text ACCESS TARGET
//       GET TARGET ("/metrics") and print its body as it is.
//   e2e_client latency ACCESS RUNS
//       B4: keeps one event-stream WebSocket (all jobs) and one keep-alive
//       HTTPS connection open, then RUNS times: POST a one-task /bin/true
//       job and wait for its terminal event; prints the per-run ms.
//   e2e_client events ACCESS
//       bench/scale c: follows the event stream of every job as the
//       dashboard does (no snapshot, batched) until stdin ends, and prints the lag
//       of each event (its arrival against its `at_ms`, the moment the
//       server made the change; same machine, same clock): {"events",
//       "lag_p50_ms","lag_p99_ms","lag_max_ms"}. Says "e2e_client:
//       subscribed" on stderr once the stream is open. With --socket
//       PATH, over the server's local socket at that path (plain, no TLS)
//       instead; with --coalesce, as the dashboard asks (?coalesce=true:
//       a task's changes while a message is on its way come as one).
//   e2e_client spawn RUNS CMD [ARG...]
//       posix_spawn + waitpid of CMD, RUNS times, per-run ms: the bare
//       baseline (/bin/true) and the CLI figure (drover submit --wait ...),
//       timed by the same code.
//
// Every mode prints one JSON line. Errors go to stderr, exit status 1.
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <nlohmann/json.hpp>

#include "cli/job_watch.h"
#include "cli/streams.h"
#include "net/access_file.h"
#include "net/client_options.h"
#include "net/event_loop.h"
#include "net/http_client.h"
#include "net/tls_identity.h"
#include "net/ws_client.h"

extern char** environ;

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using SteadyClock = std::chrono::steady_clock;
using drover::Result;
using drover::Status;

double MsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::cerr << "e2e_client: " << what << std::endl;
  std::exit(1);
}

drover::net::ClientOptions OptionsFrom(const std::string& access_path) {
  Result<drover::net::AccessInfo> access = drover::net::ReadAccessFile(access_path);
  if (!access.ok()) Die(access.status().ToString());
  Result<drover::net::ClientOptions> options = drover::net::ClientOptionsFromAccess(*access);
  if (!options.ok()) Die(options.status().ToString());
  return *options;
}

int RunGet(const std::string& access, const std::string& target, bool json) {
  drover::net::HttpClient http_client(OptionsFrom(access));
  Result<drover::net::Response> r = http_client.Get(target);
  if (!r.ok()) Die(r.status().ToString());
  if (r->status != 200) Die("GET " + target + ": HTTP " + std::to_string(r->status));
  if (json) {
    std::cout << nlohmann::json::parse(r->body).dump() << std::endl;
  } else {
    std::cout << r->body;
  }
  return 0;
}

// A keep-alive HTTPS (or HTTP) connection with the pinned fingerprint, so
// B4 measures the server, not one TLS handshake per request.
class KeepAliveClient {
 public:
  explicit KeepAliveClient(const drover::net::ClientOptions& o)
      : options_(o), ctx_(asio::ssl::context::tls_client), tls_(io_, ctx_), plain_(io_) {
    asio::ip::tcp::resolver resolver(io_);
    auto endpoints = resolver.resolve(o.host, std::to_string(o.port));
    if (o.tls) {
      ctx_.set_verify_mode(asio::ssl::verify_none);  // pinned below instead
      beast::get_lowest_layer(tls_).connect(endpoints);
      beast::get_lowest_layer(tls_).socket().set_option(asio::ip::tcp::no_delay(true));
      tls_.handshake(asio::ssl::stream_base::client);
      Result<std::string> fp = drover::net::NormalizeFingerprint(o.fingerprint);
      if (!fp.ok()) Die(fp.status().ToString());
      Status pinned = drover::net::CheckPeerFingerprint(tls_.native_handle(), *fp);
      if (!pinned.ok()) Die(pinned.ToString());
    } else {
      plain_.connect(endpoints);
      plain_.socket().set_option(asio::ip::tcp::no_delay(true));
    }
  }

  std::string Post(const std::string& target, const std::string& body) {
    return Send(http::verb::post, target, body);
  }
  std::string Get(const std::string& target) { return Send(http::verb::get, target, ""); }

 private:
  std::string Send(http::verb verb, const std::string& target, const std::string& body) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, options_.host);
    req.set(http::field::authorization, "Bearer " + options_.token);
    if (verb == http::verb::post) req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    req.body() = body;
    req.prepare_payload();
    http::response<http::string_body> res;
    if (options_.tls) {
      http::write(tls_, req);
      http::read(tls_, buffer_, res);
    } else {
      http::write(plain_, req);
      http::read(plain_, buffer_, res);
    }
    if (res.result_int() != 200) {
      Die(std::string(http::to_string(verb)) + " " + target + ": HTTP " + res.body());
    }
    return res.body();
  }


  drover::net::ClientOptions options_;
  asio::io_context io_;
  asio::ssl::context ctx_;
  beast::ssl_stream<beast::tcp_stream> tls_;
  beast::tcp_stream plain_;
  beast::flat_buffer buffer_;
};

// B2/B3: submit, follow, time.
int RunJob(const std::string& access, const std::string& spec) {
  drover::net::ClientOptions options = OptionsFrom(access);
  nlohmann::json parsed = nlohmann::json::parse(spec, nullptr, false);
  if (parsed.is_discarded()) Die("SPEC_JSON is not JSON");
  // Connected before the clock starts: the makespan is the tasks', not a
  // TLS handshake's (B4 through the CLI measures a fresh client).
  KeepAliveClient client(options);
  const SteadyClock::time_point t0 = SteadyClock::now();
  const uint64_t job =
      nlohmann::json::parse(client.Post("/api/v1/jobs", spec))["id"].get<uint64_t>();
  const uint64_t count =
      nlohmann::json::parse(client.Get("/api/v1/jobs/" + std::to_string(job) + "?limit=0"))
          ["task_count"].get<uint64_t>();
  drover::cli::JobWatch watch(count);
  Status followed = drover::cli::FollowJob(options, drover::JobId(job), watch,
                                           [](const auto&, const auto&) {});
  const double wall_ms = MsSince(t0);
  if (!followed.ok()) Die(followed.ToString());
  nlohmann::json out{{"job", job},
                     {"tasks", count},
                     {"succeeded", watch.count("succeeded")},
                     {"wall_s", wall_ms / 1000.0}};
  std::cout << out.dump() << std::endl;
  return watch.succeeded() ? 0 : 1;
}

// bench/scale: submit and return; the fake workers count the tasks done.
int RunPost(const std::string& access, const std::string& spec, int count) {
  if (count < 1) Die("COUNT must be at least 1");
  KeepAliveClient client(OptionsFrom(access));
  const SteadyClock::time_point t0 = SteadyClock::now();
  uint64_t first = 0;
  uint64_t last = 0;
  for (int i = 0; i < count; ++i) {
    last = nlohmann::json::parse(client.Post("/api/v1/jobs", spec))["id"].get<uint64_t>();
    if (i == 0) first = last;
  }
  nlohmann::json out{
      {"first_job", first}, {"last_job", last}, {"count", count}, {"submit_s", MsSince(t0) / 1000}};
  std::cout << out.dump() << std::endl;
  return 0;
}

// Terminal events seen on the stream, by task id, with their arrival time.
struct Terminals {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::pair<SteadyClock::time_point, std::string>> seen;
  bool ready = false;
  std::optional<Status> error;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

int RunLatency(const std::string& access, int runs) {
  drover::net::ClientOptions options = OptionsFrom(access);
  drover::net::EventLoop loop;
  Terminals terminals;
  std::shared_ptr<drover::net::WsSession> session;
  drover::net::ConnectWebSocket(
      loop, options, "/api/v1/events",
      [&](Result<std::shared_ptr<drover::net::WsSession>> s) {
        std::lock_guard<std::mutex> lock(terminals.mu);
        if (!s.ok()) {
          terminals.error = s.status();
          terminals.cv.notify_all();
          return;
        }
        session = *s;
        session->OnText([&](std::string text) {
          const SteadyClock::time_point now = SteadyClock::now();
          Result<drover::cli::TaskEventView> e = drover::cli::DecodeTaskEventView(text);
          if (!e.ok() || !drover::cli::IsTerminalStateName(e->to)) return;
          std::lock_guard<std::mutex> l(terminals.mu);
          terminals.seen[e->task] = {now, e->to};
          terminals.cv.notify_all();
        });
        session->OnClose([&](const Status& why) {
          std::lock_guard<std::mutex> l(terminals.mu);
          terminals.error = why.ok() ? drover::Unavailable("event stream closed") : why;
          terminals.cv.notify_all();
        });
        terminals.ready = true;
        terminals.cv.notify_all();
      });
  std::thread loop_thread([&] { loop.Run(); });
  {
    std::unique_lock<std::mutex> lock(terminals.mu);
    terminals.cv.wait(lock, [&] { return terminals.ready || terminals.error; });
    if (terminals.error) Die(terminals.error->ToString());
  }
  KeepAliveClient client(options);
  const std::string spec =
      R"({"name":"b4","task":[{"id":"t","command":["/bin/true"]}]})";
  std::vector<double> ms;
  int failed = 0;
  for (int i = 0; i < runs; ++i) {
    const SteadyClock::time_point t0 = SteadyClock::now();
    nlohmann::json reply = nlohmann::json::parse(client.Post("/api/v1/jobs", spec));
    const std::string task = std::to_string(reply["id"].get<uint64_t>()) + ".0";
    std::unique_lock<std::mutex> lock(terminals.mu);
    terminals.cv.wait(lock, [&] { return terminals.seen.count(task) || terminals.error; });
    if (terminals.error) Die(terminals.error->ToString());
    auto [at, state] = terminals.seen[task];
    ms.push_back(std::chrono::duration<double, std::milli>(at - t0).count());
    if (state != "succeeded") ++failed;
  }
  loop.Post([&] {
    if (session) session->Close("done");
    loop.Stop();
  });
  loop_thread.join();
  nlohmann::json out{{"runs", runs}, {"failed", failed}, {"median_ms", Median(ms)}, {"ms", ms}};
  std::cout << out.dump() << std::endl;
  return failed == 0 ? 0 : 1;
}

int RunEvents(const std::string& access, const std::string& local_socket, bool coalesce) {
  drover::net::ClientOptions options = OptionsFrom(access);
  options.local_socket = local_socket;
  drover::net::EventLoop loop;
  std::vector<double> lags;  // loop thread until it is joined
  size_t messages = 0;
  std::optional<Status> error;
  std::shared_ptr<drover::net::WsSession> session;
  drover::net::ConnectWebSocket(
      loop, options,
      std::string("/api/v1/events?snapshot=false&batch=true") + (coalesce ? "&coalesce=true" : ""),
      [&](Result<std::shared_ptr<drover::net::WsSession>> s) {
        if (!s.ok()) {
          error = s.status();
          return loop.Stop();
        }
        session = *s;
        std::cerr << "e2e_client: subscribed" << std::endl;  // bench/scale waits for it
        session->OnText([&](std::string text) {
          const auto now = std::chrono::duration<double, std::milli>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
          ++messages;
          // Only the one field of each event (a message holds an array of
          // them): this client must keep up with tens of thousands of
          // events a second on a machine it shares.
          for (size_t at = text.find("\"at_ms\":"); at != std::string::npos;
               at = text.find("\"at_ms\":", at + 8)) {
            lags.push_back(now - std::strtod(text.c_str() + at + 8, nullptr));
          }
        });
        session->OnClose([&](const Status& why) {
          error = why.ok() ? drover::Unavailable("event stream closed") : why;
          loop.Stop();
        });
      });
  std::thread loop_thread([&] { loop.Run(); });
  std::string ignored;
  while (std::getline(std::cin, ignored)) {
  }
  loop.Post([&] {
    if (session) {
      session->OnClose(nullptr);
      session->Close("done");
    }
    loop.Stop();
  });
  loop_thread.join();
  if (error) Die(error->ToString());
  std::sort(lags.begin(), lags.end());
  auto at = [&](double q) {
    return lags.empty() ? 0.0
                        : lags[std::min(lags.size() - 1, static_cast<size_t>(q * lags.size()))];
  };
  nlohmann::json out{{"events", lags.size()},  {"messages", messages},
                     {"lag_p50_ms", at(0.5)},  {"lag_p90_ms", at(0.90)},
                     {"lag_p99_ms", at(0.99)}, {"lag_max_ms", lags.empty() ? 0.0 : lags.back()}};
  std::cout << out.dump() << std::endl;
  return 0;
}

int RunSpawn(int runs, char** argv) {
  std::vector<double> ms;
  int failed = 0;
  for (int i = 0; i < runs; ++i) {
    const SteadyClock::time_point t0 = SteadyClock::now();
    pid_t pid = 0;
    if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ) != 0) {
      Die(std::string("posix_spawn ") + argv[0]);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) Die("waitpid");
    ms.push_back(MsSince(t0));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  nlohmann::json out{{"runs", runs}, {"failed", failed}, {"median_ms", Median(ms)}, {"ms", ms}};
  std::cout << out.dump() << std::endl;
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage =
      "usage: e2e_client job ACCESS SPEC_JSON | post ACCESS SPEC_JSON [COUNT] | get|text ACCESS "
      "TARGET | latency ACCESS RUNS | events ACCESS [--socket PATH] [--coalesce] | spawn RUNS CMD "
      "[ARG...]";
  if (argc < 2) Die(usage);
  const std::string mode = argv[1];
  try {
    if (mode == "job" && argc == 4) return RunJob(argv[2], argv[3]);
    if (mode == "post" && (argc == 4 || argc == 5)) {
      return RunPost(argv[2], argv[3], argc == 5 ? std::stoi(argv[4]) : 1);
    }
    if (mode == "get" && argc == 4) return RunGet(argv[2], argv[3], /*json=*/true);
    if (mode == "text" && argc == 4) return RunGet(argv[2], argv[3], /*json=*/false);
    if (mode == "latency" && argc == 4) return RunLatency(argv[2], std::stoi(argv[3]));
    if (mode == "events" && argc >= 3) {
      std::string socket;
      bool coalesce = false;
      for (int i = 3; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--coalesce") {
          coalesce = true;
        } else if (flag == "--socket" && i + 1 < argc) {
          socket = argv[++i];
        } else {
          Die("events: unknown argument " + flag);
        }
      }
      return RunEvents(argv[2], socket, coalesce);
    }
    if (mode == "spawn" && argc >= 4) return RunSpawn(std::stoi(argv[2]), argv + 3);
  } catch (const std::exception& e) {
    Die(std::string(mode) + ": " + e.what());
  }
  Die(usage);
}
