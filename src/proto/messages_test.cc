#include "proto/messages.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/log_frame.h"

namespace drover::proto {
namespace {

core::TaskOutcome SampleOutcome() {
  core::TaskOutcome o;
  o.exit_code = 3;
  o.signal = 0;
  o.oom_killed = true;
  o.usage =
      core::TaskUsage{Micros(1'234'567), Micros(987'654), 4ULL << 30, 12ULL << 20, 200ULL << 20};
  o.result = "{\"loss\": 0.25}\nline two \xc3\xa9";
  o.reason = "stdout not saved: no space left on device (/w/1/0.1/stdout)";
  o.outputs = {{"model/weights.bin", 200ULL << 20, std::string(64, 'e')}};
  o.outputs_on = 4;
  o.image_digest = "sha256:" + std::string(64, 'd');
  return o;
}

Hello SampleHello() {
  Hello h;
  h.worker_name = "gpu1";
  h.previous_id = 7;
  h.agent_version = "0.1.0";
  h.key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  h.resources.name = "gpu1";
  h.resources.cpu_cores = {0, 1, 2, 3};
  h.resources.mem_bytes = 64ULL << 30;
  h.resources.gpus = {{0, "GPU-abc", "NVIDIA A100-SXM4-80GB", 80ULL << 30},
                      {1, "GPU-def", "NVIDIA A100-SXM4-80GB", 80ULL << 30}};
  h.resources.counters = {{"licenses", 4}};
  h.resources.labels = {{"os", "linux"}};
  h.resources.ends_at = TimeFromMicros(1'700'003'600'000'000);  // --lifetime
  h.resources.private_network = true;
  h.resources.disk_free_bytes = 500ULL << 30;
  h.resources.container_runtime = "podman 4.3.1 (runc)";
  h.resources.container_gpus = true;
  h.running = {{{12, 3}, 1, {0, 1}, {{1, 100, 80ULL << 30}}}, {{12, 4}, 2, {}, {}},
               {{12, 5}, 1, {0}, {}, true}};
  h.finished = {{{11, 0}, 1, SampleOutcome(), TimeFromMicros(1'700'000'000'123'456)}};
  h.files_port = 41234;
  h.files_fingerprint = std::string(64, 'f');
  return h;
}

Assignment SampleAssignment() {
  Assignment a;
  a.task = {12, 3};
  a.attempt = 2;
  a.cores = {4, 5};
  a.cpu_quota_milli = 1500;
  a.mem_limit_bytes = 4ULL << 30;
  a.gpus = {{1, 25, 8ULL << 30}};
  a.argv = {"python", "train.py", "--seed", "3"};
  a.env = {{"FOO", "bar"}};
  a.timeout = Seconds(7200);
  a.array_index = 3;
  a.job_name = "sweep";
  a.group_name = "train";
  a.inputs = {{{12, 0}, "prep result"}};
  a.after = TaskAttempt{{12, 2}, 1};
  a.vacate_signal = 10;
  a.vacate_grace = Seconds(120);
  a.files = {InputFile{{12, 0},
                       {"data/train.csv", 1234, std::string(64, 'c')},
                       {FileSource{4, "10.0.0.5", 41234, std::string(64, 'f')},
                        FileSource{6, "::1", 7211, std::string(64, 'd')}},
                       "v1.grant"}};
  return a;
}

std::vector<WorkerMessage> AllWorkerMessages() {
  return {SampleHello(),
          Heartbeat{{37, 1ULL << 30, {{0, 90, 1ULL << 30}}}, {{{12, 3}, 1}}},
          Heartbeat{{37, 1ULL << 30, {}}, {}, "/scratch not mounted", "program"},
          Heartbeat{{37, 1ULL << 30, {}, 250ULL << 30}, {}},  // the work directory's free space
          Heartbeat{{37, 1ULL << 30, {}}, {}, "", "", {{1, "Xid 79 (critical)"}, {3, "lost"}}},
          Started{{{{12, 3}, 1, TimeFromMicros(1'700'000'000'000'001)}, {{12, 4}, 1, {}}}},
          Finished{{{{12, 3}, 1, SampleOutcome(), TimeFromMicros(5)},
                    {{12, 4}, 2, SampleOutcome(), TimeFromMicros(6), /*never_started=*/true}}},
          Refused{{12, 3}, 1, "needs 4 GiB, 1.5 GiB free"},
          Refused{{12, 4}, 1, "input 12.0/x: sha256 mismatch", {{{12, 0}, 3}, {{11, 2}, 4}}},
          LogChunk{{12, 3}, 1, LogStream::kStderr, 100, 200, true, "gone"},
          Drain{true, "SIGTERM"},
          Finished{{{{12, 5}, 1, SampleOutcome(), TimeFromMicros(7), false, /*vacated=*/true}}},
          Owner{true, "owner present; offers work after 15m idle",
                TimeFromMicros(1'700'000'000'000'000), 16'900},
          Owner{false, "owner away", TimeFromMicros(1'700'000'900'000'000), 0},
          OutputsKept{{4, 12}},
          OutputsReplicated{{12, 3}, 2}};
}

std::vector<ServerMessage> AllServerMessages() {
  return {HelloAck{7, "srv-1", Seconds(2), Seconds(30), std::string(64, '0')},
          HelloAck{7, "srv-1", Seconds(2), Seconds(30)},
          Assign{{SampleAssignment(), Assignment{{1, 0}, 1, {}, 0, 0, {}, {"true"}}}},
          Ack{{{{12, 3}, 1}}},
          Cancel{{12, 3}, 1, "canceled by user"},
          Cancel{{12, 3}, 1, "preempted by 14.2 (priority 90)", /*vacate=*/true},
          Kill{{12, 3}, 1, "lease lost"},
          Withdraw{{12, 3}, 1, "room freed first on worker 2"},
          LogRequest{{12, 3}, 0, LogStream::kStdout, true, false, 4096},
          Drain{false, ""},
          Error{"failed_precondition", "protocol version 2 is not supported"},
          ReleaseOutputs{{4, 12}},
          Replicate{{12, 0}, 1, SampleAssignment().files}};
}

TEST(MessagesTest, EveryWorkerMessageRoundTrips) {
  for (const WorkerMessage& m : AllWorkerMessages()) {
    std::string text = Encode(m);
    Result<WorkerMessage> back = DecodeWorkerMessage(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
    EXPECT_EQ(*back, m) << text;
    EXPECT_NE(text.find("\"type\":\"" + std::string(MessageTypeName(m)) + "\""), std::string::npos);
    EXPECT_NE(text.find("\"v\":1"), std::string::npos) << text;
  }
}

TEST(MessagesTest, EveryServerMessageRoundTrips) {
  for (const ServerMessage& m : AllServerMessages()) {
    std::string text = Encode(m);
    Result<ServerMessage> back = DecodeServerMessage(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
    EXPECT_EQ(*back, m) << text;
  }
}

// A batch frame carries several messages in order; a plain message is a
// frame of one. Both directions.
TEST(MessagesTest, BatchFramesRoundTripInOrder) {
  std::vector<std::string> texts;
  for (const WorkerMessage& m : AllWorkerMessages()) texts.push_back(Encode(m));
  Result<std::vector<WorkerMessage>> back = DecodeWorkerFrame(EncodeBatch(texts));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, AllWorkerMessages());
  texts.clear();
  for (const ServerMessage& m : AllServerMessages()) texts.push_back(Encode(m));
  Result<std::vector<ServerMessage>> server = DecodeServerFrame(EncodeBatch(texts));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(*server, AllServerMessages());
  Result<std::vector<ServerMessage>> one = DecodeServerFrame(Encode(ServerMessage(Ack{})));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(*one, std::vector<ServerMessage>{Ack{}});
  // A peer that reads one message per frame refuses a batch by name.
  Result<ServerMessage> old = DecodeServerMessage(EncodeBatch({Encode(ServerMessage(Ack{}))}));
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("unknown message type \"batch\""), std::string::npos)
      << old.status().message();
}

TEST(MessagesTest, BadBatchesAreRefusedNamingTheMessage) {
  const std::string ack = Encode(ServerMessage(Ack{}));
  struct Case {
    std::string text;
    std::string want;
  };
  const std::vector<Case> cases = {
      {R"({"v":1,"type":"batch","messages":[]})", "batch: messages: has 0 messages"},
      {R"({"v":1,"type":"batch","messages":{}})", "batch: messages: expected an array"},
      {R"({"v":1,"type":"batch"})", "batch: missing \"messages\""},
      {R"({"v":2,"type":"batch","messages":[1]})", "protocol version 2"},
      {R"({"v":1,"type":"batch","messages":[)" + ack + R"(,{"v":1,"type":"ack","tasks":7}]})",
       "batch: messages[1]: ack: tasks"},
      {R"({"v":1,"type":"batch","messages":[{"v":1,"type":"batch","messages":[)" + ack + "]}]}",
       "batch: messages[0]: a batch is not nested"},
      {EncodeBatch(std::vector<std::string>(kMaxBatchMessages + 1, ack)), "a batch holds 1 to"},
  };
  for (const Case& c : cases) {
    Result<std::vector<ServerMessage>> r = DecodeServerFrame(c.text);
    ASSERT_FALSE(r.ok()) << c.text.substr(0, 200);
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
  }
  // FramesOf splits at the limit: a full batch, then the one left alone.
  std::vector<std::string> frames = FramesOf(std::vector<std::string>(kMaxBatchMessages + 1, ack));
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(DecodeServerFrame(frames[0])->size(), kMaxBatchMessages);
  EXPECT_EQ(frames[1], ack);
  EXPECT_TRUE(FramesOf({}).empty());
  EXPECT_TRUE(BatchFits(1, 100, 100));
  EXPECT_FALSE(BatchFits(kMaxBatchMessages, 100, 100));
  EXPECT_FALSE(BatchFits(1, kMaxMessageBytes - 10, 100));
}

// What each side says it reads: written only when true, so a peer from
// before batches sees no new field, and read as false when absent.
TEST(MessagesTest, BatchesFlagsAreWrittenOnlyWhenTrue) {
  Hello hello;
  hello.worker_name = "w";
  EXPECT_EQ(Encode(WorkerMessage(hello)).find("batches"), std::string::npos);
  hello.batches = true;
  Result<WorkerMessage> back = DecodeWorkerMessage(Encode(WorkerMessage(hello)));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(std::get<Hello>(*back).batches);
  HelloAck ack;
  ack.worker = 1;
  EXPECT_EQ(Encode(ServerMessage(ack)).find("batches"), std::string::npos);
  ack.batches = true;
  Result<ServerMessage> acked = DecodeServerMessage(Encode(ServerMessage(ack)));
  ASSERT_TRUE(acked.ok()) << acked.status().ToString();
  EXPECT_TRUE(std::get<HelloAck>(*acked).batches);
}

TEST(MessagesTest, NeverStartedIsWrittenOnlyWhenTrueAndChecked) {
  const std::string ran =
      Encode(WorkerMessage(Finished{{{{12, 3}, 1, SampleOutcome(), TimeFromMicros(5)}}}));
  EXPECT_EQ(ran.find("never_started"), std::string::npos) << ran;
  Result<WorkerMessage> bad = DecodeWorkerMessage(
      R"({"v":1,"type":"finished","tasks":[{"task":"1.0","attempt":1,"outcome":)"
      R"({"exit_code":0,"signal":0,"oom_killed":false,"wall_us":0,"cpu_us":0,)"
      R"("peak_mem_bytes":0},)"
      R"("finished_at_us":5,"never_started":"yes"}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tasks[0].never_started"), std::string::npos)
      << bad.status().ToString();
}

TEST(MessagesTest, DesktopFieldsAreOptionalAndChecked) {
  // A plain Finished and Cancel say nothing of vacating.
  const std::string ran =
      Encode(WorkerMessage(Finished{{{{12, 3}, 1, SampleOutcome(), TimeFromMicros(5)}}}));
  EXPECT_EQ(ran.find("vacated"), std::string::npos) << ran;
  const std::string cancel = Encode(ServerMessage(Cancel{{12, 3}, 1, "canceled by user"}));
  EXPECT_EQ(cancel.find("vacate"), std::string::npos) << cancel;
  // An assignment from an older server: the default vacate signal and grace.
  Result<ServerMessage> old = DecodeServerMessage(
      R"({"type":"assign","v":1,"tasks":[{"task":"1.0","attempt":1,"cores":[0],)"
      R"("cpu_quota_milli":0,"mem_limit_bytes":0,"argv":["true"]}]})");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  const Assignment& a = std::get<Assign>(*old).tasks[0];
  EXPECT_EQ(a.vacate_signal, 15);
  EXPECT_EQ(a.vacate_grace, Seconds(30));
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type":"assign","v":1,"tasks":[{"task":"1.0","attempt":1,"cores":[0],)"
            R"("cpu_quota_milli":0,"mem_limit_bytes":0,"argv":["true"],"vacate_signal":99}]})",
            "tasks[0].vacate_signal"},
           {R"({"type":"owner","v":1,"present":"yes"})", "present"},
           {R"({"type":"owner","v":1,"present":true,"freeze_us":-5})", "freeze_us"}}) {
    Result<ServerMessage> as_server = DecodeServerMessage(text);
    Result<WorkerMessage> as_worker = DecodeWorkerMessage(text);
    const Status& s =
        text.find("assign") != std::string::npos ? as_server.status() : as_worker.status();
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(s.message().find(field), std::string::npos) << s.ToString();
  }
}

TEST(MessagesTest, QueueAheadFieldsAreOptionalAndChecked) {
  Assignment plain = SampleAssignment();
  plain.after.reset();
  const std::string text = Encode(ServerMessage(Assign{{plain}}));
  EXPECT_EQ(text.find("\"after\""), std::string::npos) << text;
  Hello hello = SampleHello();
  hello.running.pop_back();
  const std::string hello_text = Encode(WorkerMessage(hello));
  EXPECT_EQ(hello_text.find("\"queued\""), std::string::npos) << hello_text;

  Result<ServerMessage> bad = DecodeServerMessage(
      R"({"type":"assign","v":1,"tasks":[{"task":"1.0","attempt":1,"cores":[0],)"
      R"("cpu_quota_milli":0,"mem_limit_bytes":0,"argv":["true"],"after":{"task":5}}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tasks[0].after.task"), std::string::npos)
      << bad.status().message();
}

TEST(MessagesTest, DirectionIsChecked) {
  Result<ServerMessage> wrong = DecodeServerMessage(Encode(WorkerMessage(SampleHello())));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(),
            "unknown message type \"hello\" for a server-to-worker message");
}

TEST(MessagesTest, VersionIsChecked) {
  Result<ServerMessage> newer = DecodeServerMessage(R"({"type":"ack","v":2,"tasks":[]})");
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(newer.status().message(),
            "message \"ack\" has protocol version 2; this build speaks version 1");
  // A hello of any version decodes, so the server can explain the mismatch.
  Hello h = SampleHello();
  h.protocol_version = 9;
  Result<WorkerMessage> hello = DecodeWorkerMessage(Encode(WorkerMessage(h)));
  ASSERT_TRUE(hello.ok()) << hello.status().ToString();
  EXPECT_EQ(std::get<Hello>(*hello).protocol_version, 9u);
}

std::string ServerError(std::string_view text) {
  Result<ServerMessage> m = DecodeServerMessage(text);
  EXPECT_FALSE(m.ok()) << text;
  return m.ok() ? "" : m.status().message();
}

TEST(MessagesTest, FieldErrorsNameTheField) {
  EXPECT_EQ(ServerError(R"({"v":1})"), "message: missing \"type\"");
  EXPECT_EQ(ServerError(R"({"type":"ack"})"), "message: missing \"v\"");
  EXPECT_EQ(ServerError(R"({"type":"nope","v":1})"),
            "unknown message type \"nope\" for a server-to-worker message");
  EXPECT_EQ(ServerError(R"({"type":"ack","v":1,"tasks":[{"task":"12.3","attempt":-1}]})"),
            "ack: tasks[0].attempt: -1 is out of range (0 to 4294967295)");
  EXPECT_EQ(ServerError(R"({"type":"ack","v":1,"tasks":[{"task":"12.3","attempt":1.5}]})"),
            "ack: tasks[0].attempt: expected an integer, got number 1.5");
  EXPECT_EQ(
      ServerError(
          R"({"type":"ack","v":1,"tasks":[{"task":"12.3","attempt":99999999999999999999999}]})")
          .rfind("ack: tasks[0].attempt: expected an integer, got number 9.99", 0),
      0u);
  EXPECT_EQ(ServerError(R"({"type":"ack","v":1,"tasks":{}})"),
            "ack: tasks: expected an array, got object");
  EXPECT_EQ(ServerError(R"({"type":"cancel","v":1,"task":12,"attempt":1})"),
            "cancel: task: expected a string, got integer");
  std::string assign = Encode(ServerMessage(Assign{{SampleAssignment()}}));
  std::string bad = assign;
  bad.replace(bad.find("\"cores\":[4,5]"), 13, "\"cores\":[4,\"5\"]");
  EXPECT_EQ(ServerError(bad), "assign: tasks[0].cores[1]: expected an integer, got string");
  EXPECT_EQ(
      ServerError(
          R"({"type":"hello_ack","v":1,"worker":1,"server_instance":"s","heartbeat_interval_us":2000000,"lease_ttl_us":1000000})"),
      "hello_ack: lease_ttl_us: must be longer than the heartbeat interval");
}

// A worker's name is shown in logs, tables and the dashboard: bounded and
// free of control characters.
TEST(MessagesTest, AWorkerNameIsBoundedAndHoldsNoControlCharacters) {
  for (const auto& [name, error] : std::vector<std::pair<std::string, std::string>>{
           {"gpu\n1", "hello: name: holds a control character"},
           {"a\x1b[31m", "hello: name: holds a control character"},
           {std::string(129, 'w'), "hello: name: longer than 128 bytes"}}) {
    Hello h = SampleHello();
    h.worker_name = name;
    Result<WorkerMessage> m = DecodeWorkerMessage(Encode(WorkerMessage(h)));
    ASSERT_FALSE(m.ok()) << name;
    EXPECT_EQ(m.status().message(), error);
  }
  Hello h = SampleHello();
  h.worker_name = std::string(128, 'w');
  EXPECT_TRUE(DecodeWorkerMessage(Encode(WorkerMessage(h))).ok());
}

TEST(MessagesTest, UnknownFieldsAreIgnoredForForwardCompatibility) {
  Result<ServerMessage> m =
      DecodeServerMessage(R"({"type":"kill","v":1,"task":"1.2","attempt":3,"new_field":[1,2]})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(std::get<Kill>(*m), (Kill{{1, 2}, 3, ""}));
}

TEST(MessagesTest, GarbageNeverCrashesAndAlwaysErrs) {
  std::string valid = Encode(WorkerMessage(SampleHello()));
  // Every truncation of a valid message is an error.
  for (size_t n = 0; n < valid.size(); ++n) {
    EXPECT_FALSE(DecodeWorkerMessage(valid.substr(0, n)).ok()) << n;
  }
  for (std::string_view garbage :
       {"", "null", "[]", "42", "\"hello\"", "{", "{\"type\":null,\"v\":1}", "\xff\xfe",
        "{\"type\":\"hello\",\"v\":1,\"name\":\"\xc3\"}",
        "{\"type\":\"finished\",\"v\":1,"
        "\"tasks\":[null]}"}) {
    EXPECT_FALSE(DecodeWorkerMessage(garbage).ok()) << garbage;
  }
}

TEST(MessagesTest, DeepNestingIsRejectedBeforeParsing) {
  std::string deep(100000, '[');
  Result<WorkerMessage> m = DecodeWorkerMessage(deep);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "invalid JSON: nested deeper than 64 levels");
  // Brackets inside strings do not count.
  std::string in_string =
      R"({"type":"drain","v":1,"drain":true,"reason":")" + std::string(1000, '[') + "\"}";
  EXPECT_TRUE(DecodeWorkerMessage(in_string).ok());
}

TEST(MessagesTest, SizeLimitIsCheckedFirst) {
  std::string big = R"({"type":"drain","v":1,"drain":true,"reason":")" +
                    std::string(kMaxMessageBytes, 'x') + "\"}";
  Result<WorkerMessage> m = DecodeWorkerMessage(big);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "message is " + std::to_string(big.size()) + " bytes, more than the limit of 16777216");
}

TEST(MessagesTest, OversizedResultIsRejected) {
  Finished f{{{{1, 0}, 1, SampleOutcome(), {}}}};
  f.tasks[0].outcome.result.assign(core::kMaxResultBytes + 1, 'r');
  Result<WorkerMessage> m = DecodeWorkerMessage(Encode(WorkerMessage(f)));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "finished: tasks[0].outcome.result: is 65537 bytes, more than the limit of 65536");
}

TEST(MessagesTest, InvalidUtf8IsReplacedNotThrown) {
  Refused r{{1, 0}, 1, "bad \xff byte"};
  std::string text = Encode(WorkerMessage(r));
  Result<WorkerMessage> back = DecodeWorkerMessage(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<Refused>(*back).reason, "bad \xef\xbf\xbd byte");
}

TEST(LogFrameTest, RoundTripsAndRejectsBadFrames) {
  std::string bytes = std::string("line\0with nul\n", 14);
  LogFrame frame{{(1ULL << 40) + 5, 70000}, 3, LogStream::kStderr, 1ULL << 33, bytes};
  std::string data = EncodeLogFrame(frame);
  EXPECT_EQ(data.size(), kLogFrameHeaderBytes + bytes.size());
  Result<LogFrame> back = DecodeLogFrame(data);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->task, frame.task);
  EXPECT_EQ(back->attempt, 3u);
  EXPECT_EQ(back->stream, LogStream::kStderr);
  EXPECT_EQ(back->offset, 1ULL << 33);
  EXPECT_EQ(back->bytes, bytes);

  EXPECT_FALSE(DecodeLogFrame(data.substr(0, kLogFrameHeaderBytes - 1)).ok());
  std::string bad_format = data;
  bad_format[0] = 2;
  EXPECT_EQ(DecodeLogFrame(bad_format).status().message(), "log frame has unknown format 2");
  std::string bad_stream = data;
  bad_stream[1] = 7;
  EXPECT_EQ(DecodeLogFrame(bad_stream).status().message(), "log frame has unknown stream 7");
  std::string too_big(kLogFrameHeaderBytes + kMaxLogFrameBytes + 1, '\0');
  too_big[0] = 1;
  EXPECT_FALSE(DecodeLogFrame(too_big).ok());
  // The encoder never produces a frame its decoder rejects.
  std::string huge(kMaxLogFrameBytes + 10, 'x');
  EXPECT_TRUE(
      DecodeLogFrame(EncodeLogFrame(LogFrame{{1, 0}, 1, LogStream::kStdout, 0, huge})).ok());
}

// Names of files come from workers and land in other workers' directories:
// anything that could leave the directory is refused where it is decoded.
TEST(MessagesTest, OutputNamesAndHashesAreChecked) {
  for (const char* name :
       {"", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/.", "a\nb", "a/"}) {
    core::TaskOutcome o;
    o.outputs = {{name, 1, std::string(64, 'a')}};
    std::string text = Encode(WorkerMessage{Finished{{{{1, 0}, 1, o, TimeFromMicros(1)}}}});
    Result<WorkerMessage> back = DecodeWorkerMessage(text);
    ASSERT_FALSE(back.ok()) << name;
    EXPECT_NE(back.status().message().find("outputs[0].name"), std::string::npos)
        << back.status().message();
  }
  for (const std::string& sha :
       {std::string(63, 'a'), std::string(64, 'A'), std::string(64, 'g')}) {
    core::TaskOutcome o;
    o.outputs = {{"ok.bin", 1, sha}};
    Result<WorkerMessage> back =
        DecodeWorkerMessage(Encode(WorkerMessage{Finished{{{{1, 0}, 1, o, TimeFromMicros(1)}}}}));
    ASSERT_FALSE(back.ok()) << sha;
    EXPECT_NE(back.status().message().find("outputs[0].sha256"), std::string::npos);
  }
  Assignment a = SampleAssignment();
  a.files[0].sources[0].fingerprint = "not-hex";
  Result<ServerMessage> back = DecodeServerMessage(Encode(ServerMessage{Assign{{a}}}));
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("sources[0].fingerprint"), std::string::npos)
      << back.status().message();
  // Fine names pass, nested ones too.
  EXPECT_EQ(core::OutputNameProblem("model/v1/weights.bin"), "");
  EXPECT_EQ(core::OutputNameProblem("..hidden"), "");
}

// The cap on a task's outputs: absent on the wire when there is
// none, and whose it is travels with it.
TEST(MessagesTest, AnAssignmentsMaxOutputRoundTripsAndIsOptional) {
  Assignment a = SampleAssignment();
  EXPECT_EQ(Encode(ServerMessage(Assign{{a}})).find("max_output"), std::string::npos);
  for (bool by_task : {false, true}) {
    a.max_output_bytes = 3ull << 30;
    a.max_output_by_task = by_task;
    const std::string text = Encode(ServerMessage(Assign{{a}}));
    Result<ServerMessage> back = DecodeServerMessage(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(std::get<Assign>(*back).tasks[0], a) << text;
  }
}

// A task's container image and pull policy: written only when set (the
// policy only when not "missing"), an older server's assignment without
// them reads as no image, and bad values are refused naming the field.
TEST(MessagesTest, AnAssignmentsImageRoundTripsAndIsOptional) {
  Assignment a = SampleAssignment();
  std::string text = Encode(ServerMessage(Assign{{a}}));
  EXPECT_EQ(text.find("\"image"), std::string::npos) << text;
  a.image = "docker.io/library/debian:12";
  text = Encode(ServerMessage(Assign{{a}}));
  EXPECT_NE(text.find(R"("image":"docker.io/library/debian:12")"), std::string::npos) << text;
  EXPECT_EQ(text.find("image_pull"), std::string::npos) << text;
  a.image_pull = core::ImagePull::kAlways;
  text = Encode(ServerMessage(Assign{{a}}));
  EXPECT_NE(text.find(R"("image_pull":"always")"), std::string::npos) << text;
  Result<ServerMessage> back = DecodeServerMessage(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<Assign>(*back).tasks[0], a) << text;

  const std::string head =
      R"({"type":"assign","v":1,"tasks":[{"task":"1.0","attempt":1,"cores":[0],)"
      R"("cpu_quota_milli":0,"mem_limit_bytes":0,"argv":["true"])";
  for (const auto& [field, where] : std::vector<std::pair<std::string, std::string>>{
           {R"("image":"-v /:/host")", "tasks[0].image"},
           {R"("image":7)", "tasks[0].image"},
           {R"("image":"debian","image_pull":"often")", "tasks[0].image_pull"}}) {
    Result<ServerMessage> bad = DecodeServerMessage(head + "," + field + "}]}");
    ASSERT_FALSE(bad.ok()) << field;
    EXPECT_NE(bad.status().message().find(where), std::string::npos)
        << field << ": " << bad.status().message();
  }
}

// A task's own network and its disk I/O limits: written only when set, an
// older server's assignment without them reads as the worker's network and
// no limits, and bad values are refused naming the field.
TEST(MessagesTest, AnAssignmentsNetworkAndIoLimitsRoundTripAndAreOptional) {
  Assignment a = SampleAssignment();
  std::string text = Encode(ServerMessage(Assign{{a}}));
  EXPECT_EQ(text.find("\"network\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"io\""), std::string::npos) << text;
  a.private_network = true;
  a.io.write_bps = 10 << 20;
  a.io.weight = 50;
  a.disk_bytes = 20ULL << 30;
  text = Encode(ServerMessage(Assign{{a}}));
  EXPECT_NE(text.find(R"("disk":21474836480)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("network":"none")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("io":{"weight":50,"write_bps":10485760})"), std::string::npos) << text;
  Result<ServerMessage> back = DecodeServerMessage(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<Assign>(*back).tasks[0], a) << text;

  const std::string head =
      R"({"type":"assign","v":1,"tasks":[{"task":"1.0","attempt":1,"cores":[0],)"
      R"("cpu_quota_milli":0,"mem_limit_bytes":0,"argv":["true"])";
  Result<ServerMessage> old = DecodeServerMessage(head + "}]}");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_FALSE(std::get<Assign>(*old).tasks[0].private_network);
  EXPECT_FALSE(std::get<Assign>(*old).tasks[0].io.Any());
  for (const auto& [field, where] : std::vector<std::pair<std::string, std::string>>{
           {R"("network":"lan")", "tasks[0].network"},
           {R"("network":1)", "tasks[0].network"},
           {R"("disk":"20GiB")", "tasks[0].disk"},
           {R"("io":{"write_bps":-1})", "tasks[0].io.write_bps"},
           {R"("io":{"weight":10001})", "tasks[0].io.weight"},
           {R"("io":{"iops":5})", "tasks[0].io"},
           {R"("io":[])", "tasks[0].io"}}) {
    Result<ServerMessage> bad = DecodeServerMessage(head + "," + field + "}]}");
    ASSERT_FALSE(bad.ok()) << field;
    EXPECT_NE(bad.status().message().find(where), std::string::npos)
        << field << ": " << bad.status().message();
  }
}

// The job's user (for per-user workers): written only when set, an
// older server's assignment without it reads as empty, and it must be a
// string.
TEST(MessagesTest, AnAssignmentsUserRoundTripsAndIsOptional) {
  Assignment a = SampleAssignment();
  EXPECT_EQ(Encode(ServerMessage(Assign{{a}})).find("\"user\""), std::string::npos);
  a.user = "ana";
  const std::string text = Encode(ServerMessage(Assign{{a}}));
  EXPECT_NE(text.find(R"("user":"ana")"), std::string::npos) << text;
  Result<ServerMessage> back = DecodeServerMessage(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<Assign>(*back).tasks[0], a) << text;

  Result<ServerMessage> old = DecodeServerMessage(
      R"({"type":"assign","v":1,"tasks":[{"task":"1.0","attempt":1,"cores":[0],)"
      R"("cpu_quota_milli":0,"mem_limit_bytes":0,"argv":["true"]}]})");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(std::get<Assign>(*old).tasks[0].user, "");
  Result<ServerMessage> bad = DecodeServerMessage(
      R"({"type":"assign","v":1,"tasks":[{"task":"1.0","attempt":1,"cores":[0],)"
      R"("cpu_quota_milli":0,"mem_limit_bytes":0,"argv":["true"],"user":7}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tasks[0].user"), std::string::npos)
      << bad.status().message();
}

TEST(MessagesTest, NumberedCommandsRoundTripAndAreChecked) {
  Hello hello;
  hello.worker_name = "w";
  EXPECT_EQ(Encode(WorkerMessage(hello)).find("argv_ids"), std::string::npos);
  hello.argv_ids = true;
  Result<WorkerMessage> hello_back = DecodeWorkerMessage(Encode(WorkerMessage(hello)));
  ASSERT_TRUE(hello_back.ok()) << hello_back.status().ToString();
  EXPECT_TRUE(std::get<Hello>(*hello_back).argv_ids);

  Assignment a = SampleAssignment();
  EXPECT_EQ(Encode(ServerMessage(Assign{{a}})).find("argv_id"), std::string::npos);
  a.argv_id = 3;  // whole, to be remembered
  Result<ServerMessage> back = DecodeServerMessage(Encode(ServerMessage(Assign{{a}})));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<Assign>(*back).tasks[0], a);
  a.argv.clear();  // by its number alone
  back = DecodeServerMessage(Encode(ServerMessage(Assign{{a}})));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<Assign>(*back).tasks[0], a);

  const std::string head =
      R"({"type":"assign","v":1,"tasks":[{"task":"1.0","attempt":1,"cores":[0],)"
      R"("cpu_quota_milli":0,"mem_limit_bytes":0,)";
  Result<ServerMessage> none = DecodeServerMessage(head + R"("argv":[]}]})");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("tasks[0].argv: must not be empty (without argv_id)"),
            std::string::npos)
      << none.status().message();
  Result<ServerMessage> big = DecodeServerMessage(head + R"("argv":[],"argv_id":257}]})");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("tasks[0].argv_id: must be at most 256"), std::string::npos)
      << big.status().message();
}

TEST(MessagesTest, CheckpointsRoundTripAndTheirNamesAreChecked) {
  const core::OutputFile step{"sub/step", 3, std::string(64, 'c')};
  WorkerMessage saved = CheckpointSaved{{12, 3}, 2, {step}};
  Result<WorkerMessage> back = DecodeWorkerMessage(Encode(saved));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, saved);
  EXPECT_FALSE(DecodeWorkerMessage(Encode(WorkerMessage{CheckpointSaved{{12, 3}, 2, {}}})).ok());
  WorkerMessage outside = CheckpointSaved{{12, 3}, 2, {{"../etc/passwd", 3, step.sha256}}};
  Result<WorkerMessage> refused = DecodeWorkerMessage(Encode(outside));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("files[0].name"), std::string::npos)
      << refused.status().message();

  Assignment a{{1, 0}, 2, {}, 0, 0, {}, {"true"}};
  a.checkpoint = {step};
  a.checkpoint_from = 4;
  ServerMessage assign = Assign{{a}};
  Result<ServerMessage> assign_back = DecodeServerMessage(Encode(assign));
  ASSERT_TRUE(assign_back.ok()) << assign_back.status().ToString();
  EXPECT_EQ(*assign_back, assign);
}

TEST(MessagesTest, OutputRetentionMessagesNameTheirJobsAndCheckThem) {
  EXPECT_EQ(Encode(ServerMessage{ReleaseOutputs{{4, 12}}}),
            R"({"jobs":[4,12],"type":"release_outputs","v":1})");
  Result<WorkerMessage> zero = DecodeWorkerMessage(R"({"type":"outputs_kept","v":1,"jobs":[3,0]})");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(), "outputs_kept: jobs[1]: must be above zero");
  Result<ServerMessage> text =
      DecodeServerMessage(R"({"type":"release_outputs","v":1,"jobs":["4"]})");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("jobs[0]"), std::string::npos) << text.status().message();
  EXPECT_FALSE(DecodeServerMessage(R"({"type":"release_outputs","v":1})").ok());
}

TEST(MessagesTest, AReplicateNamesItsFiles) {
  Result<ServerMessage> none =
      DecodeServerMessage(R"({"type":"replicate","v":1,"task":"12.0","attempt":1,"files":[]})");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "replicate: files: must not be empty");
  EXPECT_FALSE(DecodeWorkerMessage(R"({"type":"outputs_replicated","v":1,"task":"12"})").ok());
}

}  // namespace
}  // namespace drover::proto

namespace drover::proto {
namespace {

// A heartbeat of a worker that predates health checks (no "unhealthy")
// reads as healthy, and a healthy one says nothing of it on the wire.
TEST(MessagesTest, AHeartbeatWithoutUnhealthyIsHealthy) {
  const std::string healthy = Encode(WorkerMessage{Heartbeat{{1, 2, {}}, {}}});
  EXPECT_EQ(healthy.find("unhealthy"), std::string::npos) << healthy;
  Result<WorkerMessage> back = DecodeWorkerMessage(healthy);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<Heartbeat>(*back).unhealthy, "");
  const std::string base =
      R"({"type":"heartbeat","v":1,"utilization":{"cpu_percent":1,"mem_used_bytes":2},)";
  Result<WorkerMessage> sick = DecodeWorkerMessage(base + R"("unhealthy":"disk full"})");
  ASSERT_TRUE(sick.ok()) << sick.status().ToString();
  EXPECT_EQ(std::get<Heartbeat>(*sick).unhealthy, "disk full");
  Result<WorkerMessage> bad = DecodeWorkerMessage(base + R"("unhealthy":7})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unhealthy"), std::string::npos) << bad.status().ToString();
}

}  // namespace
}  // namespace drover::proto
