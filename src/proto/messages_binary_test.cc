#include "proto/messages_binary.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "proto/binary_io.h"

namespace drover::proto {
namespace {

core::TaskOutcome Outcome() {
  core::TaskOutcome o;
  o.exit_code = -3;
  o.signal = 9;
  o.oom_killed = true;
  o.usage = core::TaskUsage{Micros(1'234'567), Micros(987'654), 4ULL << 30, 12ULL << 20, {}};
  // Not UTF-8: JSON would replace it, a binary frame carries it as it is.
  o.result = "{\"loss\": 0.25}\n\xff\xfe";
  o.reason = "exit code 3";
  o.outputs = {{"model/weights.bin", 200ULL << 20, std::string(64, 'e')}};
  o.outputs_on = 4;
  o.replicas = {5, 6};
  o.cached_from = {9, 1};
  o.cached_ended = TimeFromMicros(1'700'000'000'000'000);
  o.cached_ran = Seconds(3);
  o.image_digest = "sha256:" + std::string(64, 'd');
  return o;
}

// Every field an assignment with a binary form has, none at its default.
Assignment PlainAssignment() {
  Assignment a;
  a.task = {12, 3};
  a.attempt = 2;
  a.cores = {4, 5};
  a.cpu_quota_milli = 1500;
  a.mem_limit_bytes = 4ULL << 30;
  a.gpus = {{1, 25, 8ULL << 30}};
  a.argv = {"python", "train.py", "--seed", "3"};
  a.argv_id = 7;
  a.env = {{"FOO", "bar"}, {"EMPTY", ""}};
  a.timeout = Seconds(7200);
  a.array_index = -3;
  a.job_name = "sweep";
  a.group_name = "train";
  a.inputs = {{{12, 0}, "prep result"}, {{11, 4}, ""}};
  a.after = TaskAttempt{{12, 2}, 1};
  a.vacate_signal = 10;
  a.vacate_grace = Seconds(120);
  a.max_output_bytes = 1ULL << 30;
  a.max_output_by_task = true;
  a.user = "alice";
  return a;
}

std::vector<WorkerMessage> HotWorkerMessages() {
  return {Started{{{{12, 3}, 1, TimeFromMicros(1'700'000'000'000'001)}, {{12, 4}, 1, {}}}},
          Finished{{{{12, 3}, 1, Outcome(), TimeFromMicros(5)},
                    {{12, 4}, 2, core::TaskOutcome{}, TimeFromMicros(6), /*never_started=*/true},
                    {{12, 5}, 1, Outcome(), TimeFromMicros(7), false, /*vacated=*/true}}}};
}

std::vector<ServerMessage> HotServerMessages() {
  Assignment minimal;
  minimal.task = {1, 0};
  minimal.attempt = 1;
  minimal.argv = {"true"};
  Assignment by_number = minimal;
  by_number.argv.clear();
  by_number.argv_id = 256;
  return {Assign{{PlainAssignment(), minimal, by_number}}, Ack{{{{12, 3}, 1}, {{12, 4}, 2}}}};
}

template <typename Variant>
std::string OneFrame(const Variant& m) {
  WireMessage wire = EncodeForPeer(m, /*binary=*/true);
  EXPECT_TRUE(wire.binary);
  return EncodeBinaryFrame({wire.bytes});
}

TEST(BinaryFramesTest, EveryHotMessageRoundTripsByteForByte) {
  for (const WorkerMessage& m : HotWorkerMessages()) {
    Result<std::vector<WorkerMessage>> back = DecodeWorkerBinaryFrame(OneFrame(m));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->size(), 1u);
    EXPECT_EQ(back->front(), m) << MessageTypeName(m);
  }
  for (const ServerMessage& m : HotServerMessages()) {
    Result<std::vector<ServerMessage>> back = DecodeServerBinaryFrame(OneFrame(m));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->size(), 1u);
    EXPECT_EQ(back->front(), m) << MessageTypeName(m);
  }
}

TEST(BinaryFramesTest, OnlyTheHotMessagesOfAPlainKindGoBinary) {
  EXPECT_FALSE(EncodeForPeer(HotServerMessages()[1], /*binary=*/false).binary);
  EXPECT_EQ(EncodeForPeer(HotServerMessages()[1], false).bytes, Encode(HotServerMessages()[1]));
  EXPECT_FALSE(EncodeForPeer(WorkerMessage{Heartbeat{}}, true).binary);
  EXPECT_FALSE(EncodeForPeer(ServerMessage{Cancel{{1, 0}, 1, "why"}}, true).binary);
  // An assignment with what only JSON carries sends its whole Assign as JSON.
  std::vector<Assignment> rare(8, PlainAssignment());
  rare[0].files = {InputFile{{12, 0}, {"a", 1, std::string(64, 'c')}, {}, "grant"}};
  rare[1].uploads = {{"b", 1, std::string(64, 'c')}};
  rare[2].checkpoint = {{"c", 1, std::string(64, 'c')}};
  rare[3].private_network = true;
  rare[4].io.write_bps = 1 << 20;
  rare[5].disk_bytes = 1 << 30;
  rare[6].image = "debian:12";
  rare[7].image_pull = core::ImagePull::kAlways;
  for (size_t i = 0; i < rare.size(); ++i) {
    const ServerMessage m = Assign{{PlainAssignment(), rare[i]}};
    WireMessage wire = EncodeForPeer(m, true);
    EXPECT_FALSE(wire.binary) << i;
    Result<ServerMessage> back = DecodeServerMessage(wire.bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, m) << i;
  }
}

TEST(BinaryFramesTest, FramesKeepTheOrderAndBatchOnlyForAPeerThatReadsBatches) {
  const std::vector<ServerMessage> sent = {HotServerMessages()[1], Cancel{{1, 0}, 1, "x"},
                                           Drain{true, "y"}, HotServerMessages()[0],
                                           HotServerMessages()[1]};
  for (bool batches : {false, true}) {
    std::vector<WireMessage> wire;
    for (const ServerMessage& m : sent) wire.push_back(EncodeForPeer(m, true));
    std::vector<WireMessage> frames = FramesFor(std::move(wire), batches);
    // Apart: one frame each; batched: a binary frame, a text batch, a
    // binary frame of two.
    ASSERT_EQ(frames.size(), batches ? 3u : 5u);
    std::vector<ServerMessage> got;
    for (const WireMessage& f : frames) {
      Result<std::vector<ServerMessage>> part =
          f.binary ? DecodeServerBinaryFrame(f.bytes) : DecodeServerFrame(f.bytes);
      ASSERT_TRUE(part.ok()) << part.status().ToString();
      got.insert(got.end(), part->begin(), part->end());
    }
    EXPECT_EQ(got, sent) << "batches " << batches;
  }
}

TEST(BinaryFramesTest, ABatchIsSplitAtTheMostMessagesAFrameHolds) {
  std::vector<WireMessage> wire(kMaxBatchMessages + 1,
                                EncodeForPeer(HotServerMessages()[1], /*binary=*/true));
  std::vector<WireMessage> frames = FramesFor(std::move(wire), /*batches=*/true);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(DecodeServerBinaryFrame(frames[0].bytes)->size(), kMaxBatchMessages);
  EXPECT_EQ(DecodeServerBinaryFrame(frames[1].bytes)->size(), 1u);
}

// A frame of one message whose bytes after the type byte are `fields`.
std::string FrameOf(uint8_t type, const std::string& fields) {
  return EncodeBinaryFrame({std::string(1, static_cast<char>(type)) + fields});
}

std::string AckFields(uint64_t job) {
  std::string out;
  internal::BinaryWriter w(&out);
  w.Unsigned(1);
  w.Unsigned(job);
  w.Unsigned(0);
  w.Unsigned(1);
  return out;
}

// An Assign of one PlainAssignment changed by `edit`, encoded.
template <typename F>
std::string AssignFrame(F edit) {
  Assignment a = PlainAssignment();
  edit(a);
  return OneFrame(ServerMessage{Assign{{a}}});
}

TEST(BinaryFramesTest, BadFramesAreRefusedNamingWhatIsWrong) {
  auto server_error = [](const std::string& frame) {
    Result<std::vector<ServerMessage>> r = DecodeServerBinaryFrame(frame);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  const std::string ack = FrameOf(kBinaryAck, AckFields(12));
  ASSERT_TRUE(DecodeServerBinaryFrame(ack).ok());
  EXPECT_NE(server_error(ack.substr(0, ack.size() - 1)).find("past the end"), std::string::npos);
  EXPECT_NE(server_error(ack + "x").find("bytes after its last message"), std::string::npos);
  EXPECT_NE(server_error(FrameOf(kBinaryAck, AckFields(12) + "x")).find("bytes left"),
            std::string::npos);
  EXPECT_NE(server_error(FrameOf(kBinaryAck, AckFields(0))).find("ack: task"), std::string::npos);
  EXPECT_NE(server_error(OneFrame(HotWorkerMessages()[0])).find("not a server message"),
            std::string::npos);
  EXPECT_NE(server_error(FrameOf(99, "")).find("messages[0]"), std::string::npos);
  EXPECT_NE(server_error(std::string("\x01\x01\x01", 3)).find("format 1"), std::string::npos);
  EXPECT_NE(server_error(std::string("\x02\x01\x00", 3)).find("holds none"), std::string::npos);
  EXPECT_NE(server_error("").find("truncated"), std::string::npos);
  Result<std::vector<ServerMessage>> later =
      DecodeServerBinaryFrame(std::string("\x02\x02\x01", 3));
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(later.status().message().find("version 2"), std::string::npos);
  // A count that could not fit allocates nothing.
  EXPECT_NE(server_error(std::string("\x02\x01\xff\x07", 4)).find("messages"), std::string::npos);

  // The checks of the JSON decoding, field by field.
  EXPECT_NE(server_error(AssignFrame([](Assignment& a) {
              a.vacate_signal = 0;
            })).find("assign: vacate_signal: must be a signal number"),
            std::string::npos);
  EXPECT_NE(
      server_error(AssignFrame([](Assignment& a) { a.gpus[0].share = 0; })).find("gpus.share"),
      std::string::npos);
  EXPECT_NE(server_error(AssignFrame([](Assignment& a) {
              a.argv.clear();
              a.argv_id = 0;
            })).find("argv: must not be empty"),
            std::string::npos);
  EXPECT_NE(
      server_error(AssignFrame([](Assignment& a) { a.argv_id = kMaxArgvIds + 1; })).find("argv_id"),
      std::string::npos);
  EXPECT_NE(server_error(AssignFrame([](Assignment& a) {
              a.cpu_quota_milli = -1;
            })).find("cpu_quota_milli"),
            std::string::npos);
  EXPECT_NE(
      server_error(AssignFrame([](Assignment& a) { a.timeout = Micros(-1); })).find("timeout"),
      std::string::npos);
  EXPECT_NE(server_error(AssignFrame([](Assignment& a) {
              a.vacate_grace = Micros(-1);
            })).find("vacate_grace"),
            std::string::npos);
  EXPECT_NE(server_error(AssignFrame([](Assignment& a) {
              a.after = TaskAttempt{{0, 1}, 1};
            })).find("after"),
            std::string::npos);

  auto worker_error = [](const WorkerMessage& m) {
    Result<std::vector<WorkerMessage>> r = DecodeWorkerBinaryFrame(OneFrame(m));
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  Finished bad = std::get<Finished>(HotWorkerMessages()[1]);
  bad.tasks[0].outcome.outputs[0].sha256 = "nothex";
  EXPECT_NE(worker_error(bad).find("finished: outputs.sha256"), std::string::npos);
  bad = std::get<Finished>(HotWorkerMessages()[1]);
  bad.tasks[0].outcome.outputs[0].name = "../escape";
  EXPECT_NE(worker_error(bad).find("outputs.name"), std::string::npos);
  bad = std::get<Finished>(HotWorkerMessages()[1]);
  bad.tasks[0].outcome.result = std::string(core::kMaxResultBytes + 1, 'r');
  EXPECT_NE(worker_error(bad).find("result"), std::string::npos);
  EXPECT_NE(worker_error(WorkerMessage{Started{{{{0, 1}, 1, {}}}}}).find("started: task"),
            std::string::npos);
  EXPECT_NE(DecodeWorkerBinaryFrame(OneFrame(HotServerMessages()[1]))
                .status()
                .message()
                .find("not a worker message"),
            std::string::npos);
}

TEST(BinaryFramesTest, GarbageNeverCrashesAndAlwaysErrs) {
  const std::string good = OneFrame(HotWorkerMessages()[1]);
  // Every prefix, and every byte flipped: an error or a frame, never a crash.
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(DecodeWorkerBinaryFrame(good.substr(0, n)).ok()) << n;
  }
  for (size_t i = 0; i < good.size(); ++i) {
    std::string flipped = good;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    (void)DecodeWorkerBinaryFrame(flipped);
    (void)DecodeServerBinaryFrame(flipped);
  }
}

TEST(BinaryFramesTest, AFrameIsDescribedAsTheJsonOfItsMessages) {
  std::vector<std::string> messages;
  for (const ServerMessage& m : HotServerMessages())
    messages.push_back(EncodeForPeer(m, true).bytes);
  Result<std::string> described = DescribeBinaryFrame(EncodeBinaryFrame(messages));
  ASSERT_TRUE(described.ok()) << described.status().ToString();
  const std::string& text = *described;
  EXPECT_NE(text.find("\"type\":\"assign\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"type\":\"ack\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"job_name\":\"sweep\""), std::string::npos) << text;
  EXPECT_NE(DescribeBinaryFrame("\x02\x01").status().message().find("not a readable binary frame"),
            std::string::npos);
}

TEST(BinaryFramesTest, TheBinaryFlagsAreWrittenOnlyWhenTrue) {
  Hello hello;
  hello.worker_name = "w";
  EXPECT_EQ(Encode(WorkerMessage(hello)).find("binary"), std::string::npos);
  hello.binary = true;
  Result<WorkerMessage> back = DecodeWorkerMessage(Encode(WorkerMessage(hello)));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(std::get<Hello>(*back).binary);
  HelloAck ack;
  ack.worker = 1;
  EXPECT_EQ(Encode(ServerMessage(ack)).find("binary"), std::string::npos);
  ack.binary = true;
  Result<ServerMessage> acked = DecodeServerMessage(Encode(ServerMessage(ack)));
  ASSERT_TRUE(acked.ok()) << acked.status().ToString();
  EXPECT_TRUE(std::get<HelloAck>(*acked).binary);
}

}  // namespace
}  // namespace drover::proto
