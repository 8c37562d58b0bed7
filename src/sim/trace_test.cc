#include "sim/trace.h"

#include <gtest/gtest.h>

#include <sstream>

#include "common/quantity.h"

namespace drover::sim {
namespace {

Result<Trace> Parse(const std::string& text) {
  std::istringstream in(text);
  return ParseTrace(in, "t.jsonl");
}

std::string ErrorOf(const std::string& text) {
  Result<Trace> t = Parse(text);
  EXPECT_FALSE(t.ok());
  if (t.ok()) return "";
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  return t.status().message();
}

TEST(TraceTest, ReadsEveryFieldAndInternsRequestsAndUsers) {
  Result<Trace> t = Parse(
      R"({"id":"prep","submit":0,"duration":"5m","limit":"10m","cpus":"500m","mem":"4GiB","user":"ann"}

{"id":"train","submit":1.5,"duration":3600,"cpus":2,"gpus":0.25,"gpu_mem":"20GiB","gpu_type":["A100","H100"],"deps":["prep"],"priority":3,"user":"bob"}
{"id":"train2","submit":"2s","duration":60.000001,"cpus":2,"gpus":"0.25","gpu_mem":"20GiB","gpu_type":["A100","H100"],"user":"ann"}
{"submit":2,"duration":1}
)");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->tasks.size(), 4u);
  EXPECT_EQ(t->ids, (std::vector<std::string>{"prep", "train", "train2", "line 5"}));

  const TraceTask& prep = t->tasks[0];
  EXPECT_EQ(prep.submit, Seconds(0));
  EXPECT_EQ(prep.duration, Seconds(300));
  EXPECT_EQ(prep.limit, Seconds(600));
  EXPECT_EQ(t->RequestOf(prep).cpus_milli, 500);
  EXPECT_EQ(t->RequestOf(prep).mem_bytes, 4 * kGiB);
  EXPECT_EQ(t->users[prep.user], "ann");

  const TraceTask& train = t->tasks[1];
  EXPECT_EQ(train.submit, Millis(1500));
  EXPECT_EQ(train.duration, Seconds(3600));
  EXPECT_EQ(train.priority, 3);
  const core::ResourceRequest& req = t->RequestOf(train);
  EXPECT_EQ(req.cpus_milli, 2000);
  EXPECT_EQ(req.gpus, 25);
  EXPECT_EQ(req.gpu_mem_bytes, 20 * kGiB);
  EXPECT_EQ(req.gpu_types, (std::vector<std::string>{"A100", "H100"}));
  ASSERT_EQ(train.deps_count, 1u);
  EXPECT_EQ(t->deps[train.deps_begin], 0u);

  // The same request written differently is one class; users are interned.
  EXPECT_EQ(t->tasks[2].request, train.request);
  EXPECT_EQ(t->tasks[2].duration, Micros(60'000'001));
  EXPECT_EQ(t->tasks[2].user, prep.user);
  EXPECT_EQ(t->requests.size(), 3u);
  EXPECT_EQ(t->users, (std::vector<std::string>{"ann", "bob", "default"}));
  // Defaults: one cpu, no memory, no GPU, priority 0.
  EXPECT_EQ(t->RequestOf(t->tasks[3]).cpus_milli, 1000);
  EXPECT_EQ(t->RequestOf(t->tasks[3]).gpus, 0);
  EXPECT_EQ(t->tasks[3].priority, 0);
  EXPECT_EQ(t->tasks[3].limit, Duration::zero());  // no limit
}

TEST(TraceTest, ErrorsNameTheLineAndTheField) {
  const std::string ok = "{\"submit\":0,\"duration\":1}\n";
  EXPECT_EQ(
      ErrorOf(ok + "{\"submit\":0,\"duration\":1,\"gpus\":1.5}\n").rfind("t.jsonl:2: gpus: ", 0),
      0u);
  EXPECT_EQ(ErrorOf(ok + ok + "{\"submit\":0,\"duration\":1,\"mem\":\"4G\"}\n")
                .rfind("t.jsonl:3: mem: ", 0),
            0u);
  EXPECT_EQ(ErrorOf("{\"submit\":0,\"duration\":1,\"mem\":1.5}\n").rfind("t.jsonl:1: mem: ", 0),
            0u);
  EXPECT_EQ(ErrorOf("{\"submit\":0,\"duration\":-1}\n").rfind("t.jsonl:1: duration: ", 0), 0u);
  EXPECT_EQ(ErrorOf("{\"submit\":0}\n"), "t.jsonl:1: duration: missing");
  EXPECT_EQ(ErrorOf(ok + "{\"submit\":0,\"duration\":60,\"limit\":\"30s\"}\n"),
            "t.jsonl:2: limit: 30s is shorter than duration 1m (the replay does not model tasks "
            "killed at their limit)");
  EXPECT_EQ(ErrorOf("{\"submit\":0,\"duration\":0,\"limit\":0}\n"),
            "t.jsonl:1: limit: must be above 0");
  EXPECT_EQ(ErrorOf("{\"duration\":1}\n").rfind("t.jsonl:1: submit: missing", 0), 0u);
  EXPECT_EQ(ErrorOf("{\"submit\":0,\"duration\":1,\"gpu\":1}\n")
                .rfind("t.jsonl:1: unknown field \"gpu\"", 0),
            0u);
  EXPECT_EQ(ErrorOf("{\"submit\":0,\"duration\":1,\"priority\":1.5}\n")
                .rfind("t.jsonl:1: priority: expected an integer, got number", 0),
            0u);
  EXPECT_EQ(ErrorOf("{\"submit\":0,\"duration\":1,\"user\":7}\n")
                .rfind("t.jsonl:1: user: expected a string, got integer", 0),
            0u);
  EXPECT_EQ(ErrorOf(ok + "{\"submit\":0,\"duration\":1,\"deps\":[\"nope\"]}\n")
                .rfind("t.jsonl:2: deps: no earlier task has id \"nope\"", 0),
            0u);
  EXPECT_EQ(ErrorOf("{\"id\":\"x\",\"submit\":0,\"duration\":1}\n"
                    "{\"id\":\"x\",\"submit\":0,\"duration\":1}\n")
                .rfind("t.jsonl:2: id: \"x\" is used", 0),
            0u);
  EXPECT_EQ(ErrorOf("{\"submit\":5,\"duration\":1}\n{\"submit\":4,\"duration\":1}\n")
                .rfind("t.jsonl:2: submit: 4s is before the previous line's 5s", 0),
            0u);
  EXPECT_EQ(
      ErrorOf("{\"submit\":0,\"duration\":1,\"gpu_mem\":\"1GiB\"}\n").rfind("t.jsonl:1: gpus: ", 0),
      0u);
  EXPECT_EQ(ErrorOf(ok + "{\"submit\":0,\"duration\":1\n").rfind("t.jsonl:2: invalid JSON: ", 0),
            0u);
  EXPECT_EQ(ErrorOf("[1,2]\n").rfind("t.jsonl:1: expected an object, got array", 0), 0u);
  EXPECT_EQ(ErrorOf("\n  \n"), "t.jsonl: the trace has no tasks");
}

// Owner lines stand anywhere, outside the submit order; one worker's
// overlapping or touching presences merge; the list is sorted by from.
TEST(TraceTest, ReadsOwnerLinesAnywhereAndMergesOverlaps) {
  Result<Trace> t = Parse(R"({"owner":"b","from":"9h","to":"17h"}
{"submit":100,"duration":1}
{"owner":"a","from":50,"to":60}
{"owner":"b","from":"16h","to":"18h"}
{"submit":100,"duration":1}
{"owner":"a","from":60,"to":70}
{"owner":"a","from":80,"to":90}
)");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->tasks.size(), 2u);
  ASSERT_EQ(t->owners.size(), 3u);
  EXPECT_EQ(t->owners[0].worker, "a");
  EXPECT_EQ(t->owners[0].from, Seconds(50));
  EXPECT_EQ(t->owners[0].to, Seconds(70));  // touching: merged
  EXPECT_EQ(t->owners[0].line, 3u);
  EXPECT_EQ(t->owners[1].worker, "a");
  EXPECT_EQ(t->owners[1].from, Seconds(80));
  EXPECT_EQ(t->owners[2].worker, "b");
  EXPECT_EQ(t->owners[2].from, Seconds(9 * 3600));
  EXPECT_EQ(t->owners[2].to, Seconds(18 * 3600));
  EXPECT_EQ(t->owners[2].line, 1u);
}

TEST(TraceTest, OwnerLineErrorsNameTheLineAndTheField) {
  const std::string ok = "{\"submit\":0,\"duration\":1}\n";
  EXPECT_EQ(ErrorOf(ok + "{\"owner\":\"w\",\"from\":\"17h\",\"to\":\"9h\"}\n"),
            "t.jsonl:2: to: 9h is not after from 17h");
  EXPECT_EQ(ErrorOf(ok + "{\"owner\":\"w\",\"from\":5,\"to\":5}\n"),
            "t.jsonl:2: to: 5s is not after from 5s");
  EXPECT_EQ(ErrorOf(ok + "{\"owner\":\"w\",\"to\":5}\n"),
            "t.jsonl:2: from: missing (when the owner comes)");
  EXPECT_EQ(ErrorOf(ok + "{\"owner\":\"w\",\"from\":5}\n"),
            "t.jsonl:2: to: missing (when the owner leaves)");
  EXPECT_EQ(ErrorOf(ok + "{\"owner\":\"\",\"from\":0,\"to\":5}\n"),
            "t.jsonl:2: owner: must name a worker");
  EXPECT_EQ(ErrorOf(ok + "{\"owner\":3,\"from\":0,\"to\":5}\n")
                .rfind("t.jsonl:2: owner: expected a string", 0),
            0u);
  EXPECT_EQ(
      ErrorOf(ok + "{\"owner\":\"w\",\"from\":\"-1s\",\"to\":5}\n").rfind("t.jsonl:2: from: ", 0),
      0u);
  EXPECT_EQ(ErrorOf(ok + "{\"owner\":\"w\",\"from\":0,\"to\":5,\"submit\":0}\n")
                .rfind("t.jsonl:2: unknown field \"submit\"", 0),
            0u);
  EXPECT_EQ(ErrorOf("{\"owner\":\"w\",\"from\":0,\"to\":5}\n"), "t.jsonl: the trace has no tasks");
}

TEST(TraceTest, LoadTraceReportsAMissingFile) {
  Result<Trace> t = LoadTrace("/nonexistent/trace.jsonl");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace drover::sim
