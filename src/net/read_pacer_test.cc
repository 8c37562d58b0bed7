#include "net/read_pacer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "net/event_loop.h"

namespace drover::net {
namespace {

// A read that finds its message waiting completes at once: asio queues its
// completion behind what is queued. Each "read" here does the same.
struct Reads {
  EventLoop& loop;
  std::vector<std::string>& log;
  std::function<void()> Read(int i) {
    return [this, i] { loop.Post([this, i] { log.push_back("read " + std::to_string(i)); }); };
  }
};

TEST(ReadPacerTest, UnderLightLoadAReadGoesAtOnce) {
  EventLoop loop;
  std::vector<std::string> log;
  auto pacer = std::make_shared<ReadPacer>(loop, 4);
  int ran = 0;
  for (int i = 0; i < 4; ++i) pacer->Next([&] { ++ran; });
  EXPECT_EQ(ran, 4);
  EXPECT_EQ(pacer->waiting(), 0u);
  EXPECT_EQ(pacer->batches(), 0u);
}

TEST(ReadPacerTest, WhatWaitsGoesInOrderOneBatchAtATime) {
  EventLoop loop;
  std::vector<std::string> log;
  Reads reads{loop, log};
  auto pacer = std::make_shared<ReadPacer>(loop, 2);
  for (int i = 0; i < 7; ++i) pacer->Next(reads.Read(i));
  EXPECT_EQ(pacer->waiting(), 5u);
  loop.Poll();
  EXPECT_EQ(log, (std::vector<std::string>{"read 0", "read 1", "read 2", "read 3", "read 4",
                                           "read 5", "read 6"}));
  EXPECT_EQ(pacer->waiting(), 0u);
  EXPECT_EQ(pacer->batches(), 3u);  // {2, 3}, {4, 5}, {6}
}

// The point of it (bench/README.md, B6 scenario c): a socket that becomes readable
// while many reads wait is served after at most two batches of them, not
// after all of them.
TEST(ReadPacerTest, ASocketReadableMeanwhileWaitsForAtMostTwoBatches) {
  for (bool paced : {false, true}) {
    SCOPED_TRACE(paced ? "paced" : "not paced");
    EventLoop loop;
    std::vector<std::string> log;
    Reads reads{loop, log};
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    FdWatch watch(loop, fds[0], [&] {
      char c;
      ASSERT_EQ(read(fds[0], &c, 1), 1);
      log.push_back("request");
      loop.Stop();
    });
    auto pacer = std::make_shared<ReadPacer>(loop, 3);
    loop.Post([&] {
      for (int i = 0; i < 30; ++i) {
        if (paced) {
          pacer->Next(reads.Read(i));
        } else {
          reads.Read(i)();
        }
      }
      ASSERT_EQ(write(fds[1], "x", 1), 1);
    });
    loop.Run();
    ASSERT_FALSE(log.empty());
    EXPECT_EQ(log.back(), "request");
    const size_t before = log.size() - 1;
    if (paced) {
      EXPECT_LE(before, 6u);
    } else {
      EXPECT_EQ(before, 30u);  // the loop looked at the pipe after every read
    }
    close(fds[0]);
    close(fds[1]);
  }
}

TEST(ReadPacerTest, ClearDropsWhatWaitsAndAPacerGoneRunsNothing) {
  EventLoop loop;
  int ran = 0;
  auto pacer = std::make_shared<ReadPacer>(loop, 1);
  for (int i = 0; i < 3; ++i) pacer->Next([&] { ++ran; });
  EXPECT_EQ(ran, 1);
  pacer->Clear();
  loop.Poll();
  EXPECT_EQ(ran, 1);
  for (int i = 0; i < 3; ++i) pacer->Next([&] { ++ran; });
  EXPECT_EQ(ran, 2);  // a new turn: the first goes at once
  pacer.reset();      // its posted batch finds it gone
  loop.Poll();
  EXPECT_EQ(ran, 2);
}

}  // namespace
}  // namespace drover::net
