// /metrics, job reports and `drover report` against real processes: a
// diamond job with one branch clearly slower names the critical path, and
// /metrics parses with a strict text-format parser and agrees with the API.
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "cluster.h"
#include "net/http_client.h"

namespace drover::testing {
namespace {

using nlohmann::json;

// ---- a strict parser for the Prometheus text format 0.0.4 -----------------

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromFamily {
  std::string type;  // counter, gauge, histogram, summary, untyped
  bool has_help = false;
  std::vector<PromSample> samples;
};

struct PromText {
  std::map<std::string, PromFamily> families;
  // The value of the sample `name` with exactly `labels`; nullopt if absent.
  std::optional<double> Value(const std::string& name,
                              const std::map<std::string, std::string>& labels = {}) const {
    for (const auto& [fname, f] : families) {
      for (const PromSample& s : f.samples) {
        if (s.name == name && s.labels == labels) return s.value;
      }
    }
    return std::nullopt;
  }
};

bool MetricName(const std::string& s) {
  static const std::regex re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  return std::regex_match(s, re);
}

bool ParseValue(const std::string& text, double* out) {
  if (text == "+Inf") return *out = std::numeric_limits<double>::infinity(), true;
  if (text == "-Inf") return *out = -std::numeric_limits<double>::infinity(), true;
  if (text == "NaN") return *out = std::numeric_limits<double>::quiet_NaN(), true;
  static const std::regex re("[-+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]+)?");
  if (!std::regex_match(text, re)) return false;
  *out = std::stod(text);
  return true;
}

// Parses `text`; returns an error message naming the line, or "" when it is
// well-formed. Checks: every line is HELP, TYPE or a sample; names and label
// names are valid; label values use only the \\ \" \n escapes; a family's
// HELP and TYPE come once, before its samples, and its samples are
// contiguous; sample names fit the family's type; histograms have
// increasing `le` buckets with non-decreasing counts ending in +Inf equal to
// _count, and a _sum, per label set.
std::string ParseProm(const std::string& text, PromText* out) {
  if (text.empty() || text.back() != '\n') return "text must end with a newline";
  std::istringstream in(text);
  std::string line;
  int n = 0;
  std::string current;  // the family whose lines we are in
  std::set<std::string> closed;
  auto enter = [&](const std::string& family) -> std::string {
    if (family == current) return "";
    if (closed.count(family)) return "family " + family + " appears in two places";
    if (!current.empty()) closed.insert(current);
    current = family;
    return "";
  };
  while (std::getline(in, line)) {
    ++n;
    const std::string where = "line " + std::to_string(n) + " \"" + line + "\": ";
    if (line.empty()) return where + "empty line";
    if (line[0] == '#') {
      std::smatch m;
      if (std::regex_match(line, m, std::regex("# HELP ([^ ]+) (.*)"))) {
        if (!MetricName(m[1])) return where + "bad name";
        if (std::string err = enter(m[1]); !err.empty()) return where + err;
        PromFamily& f = out->families[m[1]];
        if (f.has_help) return where + "second HELP";
        if (!f.samples.empty()) return where + "HELP after samples";
        const std::string help = m[2];
        for (size_t i = 0; i < help.size(); ++i) {
          if (help[i] == '\\' && (i + 1 >= help.size() || (help[i + 1] != '\\' && help[i + 1] != 'n'))) {
            return where + "bad escape in HELP";
          }
          if (help[i] == '\\') ++i;
        }
        f.has_help = true;
      } else if (std::regex_match(line, m,
                                  std::regex("# TYPE ([^ ]+) (counter|gauge|histogram|summary|untyped)"))) {
        if (!MetricName(m[1])) return where + "bad name";
        if (std::string err = enter(m[1]); !err.empty()) return where + err;
        PromFamily& f = out->families[m[1]];
        if (!f.type.empty()) return where + "second TYPE";
        if (!f.samples.empty()) return where + "TYPE after samples";
        f.type = m[2];
      } else {
        return where + "a comment that is neither HELP nor TYPE";
      }
      continue;
    }
    // name{labels} value [timestamp]
    PromSample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (!MetricName(s.name)) return where + "bad metric name";
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (true) {
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) return where + "label without '='";
        const std::string lname = line.substr(i, eq - i);
        if (!std::regex_match(lname, std::regex("[a-zA-Z_][a-zA-Z0-9_]*"))) {
          return where + "bad label name \"" + lname + "\"";
        }
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') return where + "label value not quoted";
        ++i;
        std::string value;
        bool closed_quote = false;
        while (i < line.size()) {
          const char c = line[i++];
          if (c == '"') {
            closed_quote = true;
            break;
          }
          if (c == '\\') {
            if (i >= line.size()) return where + "dangling backslash";
            const char e = line[i++];
            if (e == '\\') value += '\\';
            else if (e == '"') value += '"';
            else if (e == 'n') value += '\n';
            else return where + "bad escape in label value";
          } else {
            value += c;
          }
        }
        if (!closed_quote) return where + "unterminated label value";
        if (!s.labels.emplace(lname, value).second) return where + "label repeated";
        if (i < line.size() && line[i] == ',') {
          ++i;
        } else if (i >= line.size() || line[i] != '}') {
          return where + "expected ',' or '}'";
        }
      }
    }
    if (i >= line.size() || line[i] != ' ') return where + "no value";
    std::string rest = line.substr(i + 1);
    std::string value_text = rest;
    if (size_t sp = rest.find(' '); sp != std::string::npos) {
      value_text = rest.substr(0, sp);
      if (!std::regex_match(rest.substr(sp + 1), std::regex("-?[0-9]+"))) {
        return where + "bad timestamp";
      }
    }
    if (!ParseValue(value_text, &s.value)) return where + "bad value \"" + value_text + "\"";
    // Which family: exact, or a histogram's suffixed series.
    std::string family = s.name;
    if (!out->families.count(family) || out->families[family].type.empty()) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string sfx = suffix;
        if (s.name.size() > sfx.size() && s.name.ends_with(sfx)) {
          const std::string base = s.name.substr(0, s.name.size() - sfx.size());
          if (out->families.count(base) && out->families[base].type == "histogram") family = base;
        }
      }
    }
    if (family != current) return where + "sample outside its family's block (or no TYPE)";
    PromFamily& f = out->families[family];
    if (f.type.empty()) return where + "sample before TYPE";
    if (f.type == "histogram") {
      if (s.name == family) return where + "histogram sample without _bucket/_sum/_count";
      if (s.name.ends_with("_bucket") != (s.labels.count("le") > 0)) {
        return where + "le belongs on _bucket lines only";
      }
    } else if (s.name != family) {
      return where + "sample name differs from its " + f.type + " family";
    }
    if (f.type == "counter" && !(s.value >= 0)) return where + "negative counter";
    f.samples.push_back(std::move(s));
  }
  // Histogram shape per label set.
  for (const auto& [name, f] : out->families) {
    if (!f.has_help) return "family " + name + " has no HELP";
    if (f.type != "histogram") continue;
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
    std::map<std::map<std::string, std::string>, double> counts;
    std::map<std::map<std::string, std::string>, bool> sums;
    for (const PromSample& s : f.samples) {
      std::map<std::string, std::string> key = s.labels;
      if (s.name == name + "_bucket") {
        double le = 0;
        if (!ParseValue(key["le"], &le)) return name + ": bad le \"" + key["le"] + "\"";
        key.erase("le");
        buckets[key].emplace_back(le, s.value);
      } else if (s.name == name + "_count") {
        counts[key] = s.value;
      } else if (s.name == name + "_sum") {
        sums[key] = true;
      } else {
        return name + ": unexpected series " + s.name;
      }
    }
    if (buckets.empty()) return name + ": no buckets";
    for (const auto& [key, list] : buckets) {
      for (size_t i = 1; i < list.size(); ++i) {
        if (!(list[i].first > list[i - 1].first)) return name + ": le not increasing";
        if (list[i].second < list[i - 1].second) return name + ": bucket counts decrease";
      }
      if (!std::isinf(list.back().first)) return name + ": last bucket is not +Inf";
      if (!counts.count(key)) return name + ": no _count";
      if (counts[key] != list.back().second) return name + ": +Inf bucket != _count";
      if (!sums.count(key)) return name + ": no _sum";
    }
  }
  return "";
}

TEST(PromParserTest, RejectsMalformedText) {
  PromText ok;
  EXPECT_EQ(ParseProm("# HELP a x\n# TYPE a gauge\na{l=\"v\\\"\\\\\\n\"} 1\n", &ok), "");
  EXPECT_EQ(ok.Value("a", {{"l", "v\"\\\n"}}), 1.0);
  for (const char* bad : {
           "# HELP a x\n# TYPE a gauge\na 1",                         // no final newline
           "# TYPE a gauge\na 1\n",                                    // no HELP
           "# HELP a x\n# TYPE a gauge\na{l=\"v\\t\"} 1\n",           // bad escape
           "# HELP a x\n# TYPE a gauge\na{l=v} 1\n",                   // unquoted
           "# HELP a x\n# TYPE a gauge\na one\n",                      // bad value
           "# HELP a x\n# TYPE a gauge\nb 1\n",                        // no family
           "# HELP a x\n# TYPE a gauge\na 1\n# HELP b y\n# TYPE b gauge\nb 1\na 2\n",
           "# HELP a x\n# TYPE a counter\na -1\n",
           "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
           "h_sum 1\nh_count 1\n",                                     // decreasing
           "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
           "h_sum 1\nh_count 3\n",                                     // +Inf != count
           "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
       }) {
    PromText p;
    EXPECT_NE(ParseProm(bad, &p), "") << bad;
  }
}

// ---- helpers ---------------------------------------------------------------

std::string MetricsText(Cluster& c) {
  Result<std::string> text = c.Api().GetText("/metrics");
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

const json& TaskIn(const json& report, const std::string& id) {
  for (const json& t : report["tasks"]) {
    if (t["id"] == id) return t;
  }
  static const json kNone;
  ADD_FAILURE() << "no task " << id << " in " << report.dump(2);
  return kNone;
}

// ---- the tests ---------------------------------------------------------------

TEST(MetricsTest, ReportNamesTheCriticalPathOfADiamond) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w1");
  // slow sleeps 0.5 s, fast does nothing: prep -> slow -> join is critical.
  const std::string file = c.WriteFile("diamond.toml", R"(name = "diamond"

[[task]]
id = "prep"
command = "sleep 0.1"

[[task]]
id = "fast"
depends_on = ["prep"]
command = "true"

[[task]]
id = "slow"
depends_on = ["prep"]
command = "sleep 0.5"

[[task]]
id = "join"
depends_on = ["fast", "slow"]
command = "sleep 0.1"
)");
  RunResult run = c.Drover({"run", "--plain", file});
  ASSERT_EQ(run.status, 0) << run.output;
  const uint64_t job = RunJobId(run.output);
  ASSERT_GT(job, 0u) << run.output;
  const std::string j = std::to_string(job);

  const json expected_path = json::array({j + ".0", j + ".2", j + ".3"});
  RunResult cli = c.Drover({"report", j, "--json"});
  ASSERT_EQ(cli.status, 0) << cli.output;
  const json report = json::parse(cli.output, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(report.is_object()) << cli.output;
  EXPECT_EQ(report["critical_path"], expected_path) << report.dump(2);
  EXPECT_EQ(report["state"], "succeeded");
  EXPECT_EQ(report["slowest"][0], j + ".2") << report.dump(2);
  EXPECT_EQ(TaskIn(report, j + ".3")["deps"], json::array({j + ".1", j + ".2"}));
  EXPECT_EQ(TaskIn(report, j + ".1")["critical"], false);
  EXPECT_GE(TaskIn(report, j + ".2")["wall_s"].get<double>(), 0.5);
  EXPECT_EQ(TaskIn(report, j + ".2")["worker_name"], "w1");
  EXPECT_GE(report["critical_path_s"].get<double>(), 0.7);
  EXPECT_GT(report["makespan_s"].get<double>(), 0.0);

  // The REST answer is the same report.
  const json rest = c.Get("/api/v1/jobs/" + j + "/report");
  EXPECT_EQ(rest["critical_path"], expected_path) << rest.dump(2);
  EXPECT_EQ(rest["tasks"].size(), 4u);

  // The table and the HTML page.
  const std::string html = c.dir() + "/report.html";
  RunResult table = c.Drover({"report", j, "--html", html});
  ASSERT_EQ(table.status, 0) << table.output;
  EXPECT_NE(table.output.find(j + ".0 -> " + j + ".2 -> " + j + ".3"), std::string::npos)
      << table.output;
  EXPECT_NE(table.output.find("timeline"), std::string::npos) << table.output;
  std::stringstream page;
  page << std::ifstream(html).rdbuf();
  EXPECT_NE(page.str().find("<svg"), std::string::npos);
  EXPECT_EQ(page.str().find("<script"), std::string::npos);

  // Bad input: named.
  RunResult missing = c.Drover({"report", "999"});
  EXPECT_EQ(missing.status, 1) << missing.output;
  EXPECT_NE(missing.output.find("999"), std::string::npos) << missing.output;
  RunResult bad = c.Drover({"report", "x1"});
  EXPECT_EQ(bad.status, 2) << bad.output;
}

TEST(MetricsTest, MetricsParseStrictlyAndMatchTheApi) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w1");
  c.StartWorker("w2", {"--cpus", "0"});
  // A job that finishes, and one whose only task can never be placed (so
  // the counts stay put while we compare).
  const uint64_t done = SubmittedJob(c.Drover({"submit", "--name", "two", "--array", "0-1", "--", "true"}));
  ASSERT_GT(done, 0u);
  ASSERT_EQ(c.Drover({"wait", std::to_string(done)}).status, 0);
  const uint64_t stuck = SubmittedJob(c.Drover({"submit", "--cpus", "64", "--", "true"}));
  ASSERT_GT(stuck, 0u);
  const json workers = c.Get("/api/v1/workers");
  ASSERT_EQ(workers["workers"].size(), 2u);
  // Drain w2 so the worker states differ.
  uint64_t w2 = 0;
  for (const json& w : workers["workers"]) {
    if (w["name"] == "w2") w2 = w["id"].get<uint64_t>();
  }
  ASSERT_GT(w2, 0u);
  ASSERT_TRUE(c.Api().Post("/api/v1/workers/" + std::to_string(w2) + "/drain").ok());

  const std::string text = MetricsText(c);
  PromText prom;
  ASSERT_EQ(ParseProm(text, &prom), "") << text;

  // Tasks by state: the sum of the jobs' counts.
  const json jobs = c.Get("/api/v1/jobs");
  std::map<std::string, double> by_state;
  for (const json& job : jobs["jobs"]) {
    for (const auto& [state, n] : job["counts"].items()) by_state[state] += n.get<double>();
  }
  ASSERT_FALSE(by_state.empty());
  for (const auto& [state, n] : by_state) {
    EXPECT_EQ(prom.Value("drover_tasks", {{"state", state}}), n) << state << "\n" << text;
  }
  EXPECT_EQ(by_state["succeeded"], 2);
  EXPECT_EQ(by_state["queued"], 1);
  EXPECT_EQ(prom.Value("drover_queue_length", {{"class", "cpu"}}), 1.0) << text;
  EXPECT_EQ(prom.Value("drover_queue_length", {{"class", "gpu"}}), 0.0) << text;
  EXPECT_EQ(prom.Value("drover_jobs", {{"state", "done"}}), 1.0) << text;
  EXPECT_EQ(prom.Value("drover_jobs", {{"state", "active"}}), 1.0) << text;

  // Workers by state, and per worker, as /api/v1/workers has them.
  std::map<std::string, double> worker_states{{"idle", 0}, {"busy", 0}, {"drained", 0}, {"lost", 0}};
  const json after = c.Get("/api/v1/workers");
  for (const json& w : after["workers"]) {
    const std::string state = w["lost"].get<bool>()      ? "lost"
                              : w["drained"].get<bool>() ? "drained"
                              : w["tasks"].empty()       ? "idle"
                                                         : "busy";
    worker_states[state] += 1;
    const std::map<std::string, std::string> l{{"worker", w["name"].get<std::string>()},
                                               {"worker_id", std::to_string(w["id"].get<uint64_t>())}};
    EXPECT_EQ(prom.Value("drover_worker_cpu_cores", l), static_cast<double>(w["cpu_cores"].size()));
    EXPECT_EQ(prom.Value("drover_worker_memory_bytes", l), w["mem_bytes"].get<double>());
    EXPECT_EQ(prom.Value("drover_worker_tasks", l), static_cast<double>(w["tasks"].size()));
    EXPECT_TRUE(prom.Value("drover_worker_cpu_utilization_ratio", l).has_value()) << text;
  }
  for (const auto& [state, n] : worker_states) {
    EXPECT_EQ(prom.Value("drover_workers", {{"state", state}}), n) << state << "\n" << text;
  }
  EXPECT_EQ(worker_states["drained"], 1);
  EXPECT_EQ(prom.Value("drover_workers_connected"), 2.0);

  // Scheduling, leases and the journal saw the two placed tasks.
  EXPECT_EQ(prom.families["drover_scheduling_latency_seconds"].type, "histogram");
  EXPECT_EQ(prom.Value("drover_scheduling_latency_seconds_count"), 2.0) << text;
  EXPECT_EQ(prom.Value("drover_lease_claims_total"), 2.0) << text;
  EXPECT_EQ(prom.Value("drover_lease_rejections_total"), 0.0) << text;
  EXPECT_GE(prom.Value("drover_journal_sync_seconds_count").value_or(0), 1.0) << text;

  // The utilization ring has samples with the agreed fields.
  const json util = c.Get("/api/v1/utilization");
  EXPECT_EQ(util["interval_ms"], 1000);
  ASSERT_FALSE(util["samples"].empty()) << util.dump();
  const json& last = util["samples"].back();
  EXPECT_TRUE(last.contains("cpu_busy_percent")) << last.dump();
  const json none = c.Get("/api/v1/utilization?since_ms=" + std::to_string(last["t_ms"].get<int64_t>()));
  for (const json& s : none["samples"]) EXPECT_GT(s["t_ms"], last["t_ms"]);

  // Without the token: 401.
  net::ClientOptions options = c.Api().options();
  options.token = std::string(64, '0');
  net::HttpClient http(options);
  Result<net::Response> r = http.Get("/metrics");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 401);
}

}  // namespace
}  // namespace drover::testing
