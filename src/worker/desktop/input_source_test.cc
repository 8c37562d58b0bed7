#include "worker/desktop/input_source.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/input.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>
#include <map>

#include "common/unique_fd.h"
#include "worker/resources/resources_test_util.h"

namespace drover::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// One event as the kernel hands it out, stamped `sec`.`usec`.
input_event Event(int64_t sec, int64_t usec, uint16_t type, uint16_t code = 0, int32_t value = 1) {
  input_event e{};
  e.input_event_sec = sec;
  e.input_event_usec = usec;
  e.type = type;
  e.code = code;
  e.value = value;
  return e;
}

std::string Bytes(std::initializer_list<input_event> events) {
  std::string out;
  for (const input_event& e : events) out.append(reinterpret_cast<const char*>(&e), sizeof(e));
  return out;
}

Time At(int64_t sec, int64_t usec = 0) { return TimeFromMicros(sec * 1'000'000 + usec); }

// ---- LatestEvdevInput ------------------------------------------------------

TEST(LatestEvdevInputTest, LatestOfKeysMotionAndAbsoluteInAnyOrder) {
  std::string bytes = Bytes({
      Event(1700000100, 500000, EV_KEY, KEY_A, 1),
      Event(1700000100, 500000, EV_SYN),
      Event(1700000300, 0, EV_REL, REL_X, 5),
      Event(1700000200, 250000, EV_ABS, ABS_X, 900),
      Event(1700000150, 0, EV_KEY, BTN_LEFT, 0),
  });
  EXPECT_EQ(LatestEvdevInput(bytes), At(1700000300));
}

TEST(LatestEvdevInputTest, SyncAndMiscEventsAloneAreNoInput) {
  EXPECT_EQ(LatestEvdevInput(""), std::nullopt);
  EXPECT_EQ(LatestEvdevInput(Bytes({Event(1700000100, 0, EV_SYN)})), std::nullopt);
  // A later EV_SYN or EV_MSC (scan code) does not move the time either.
  std::string bytes = Bytes({Event(1700000100, 7, EV_KEY, KEY_A), Event(1700000900, 0, EV_MSC),
                             Event(1700000900, 0, EV_SYN), Event(1700000900, 0, EV_LED)});
  EXPECT_EQ(LatestEvdevInput(bytes), At(1700000100, 7));
}

TEST(LatestEvdevInputTest, TrailingPartialRecordIsIgnored) {
  std::string later = Bytes({Event(1700000500, 0, EV_KEY, KEY_B)});
  std::string bytes = Bytes({Event(1700000100, 0, EV_KEY, KEY_A)}) + later.substr(0, 10);
  EXPECT_EQ(LatestEvdevInput(bytes), At(1700000100));
  EXPECT_EQ(LatestEvdevInput(later.substr(0, sizeof(input_event) - 1)), std::nullopt);
}

// ---- file: -----------------------------------------------------------------

void SetMtime(const std::string& path, int64_t sec, int64_t nsec) {
  timespec times[2] = {{sec, nsec}, {sec, nsec}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << std::strerror(errno);
}

TEST(FileInputTest, MtimeIsTheLastInputAndNoFileIsNone) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/owner";
  Result<std::unique_ptr<InputSource>> source = MakeInputSource("file:" + path);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->Describe(), "file " + path);
  EXPECT_EQ((*source)->LastInput(), std::nullopt);

  dir.Write("owner", "");
  SetMtime(path, 1700000000, 123456789);
  EXPECT_EQ((*source)->LastInput(), At(1700000000, 123456));
  SetMtime(path, 1700000042, 0);
  EXPECT_EQ((*source)->LastInput(), At(1700000042));
}

TEST(InputSpecTest, BadSpecsSayWhatIsExpected) {
  Result<std::unique_ptr<InputSource>> r = MakeInputSource("file:");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  r = MakeInputSource("x11");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("\"x11\""));
  EXPECT_THAT(r.status().message(), HasSubstr("evdev:DIR"));
}

// ---- evdev -----------------------------------------------------------------

// A FIFO named like a device: opened O_RDONLY|O_NONBLOCK it reads as one.
// Write() needs the source to have opened it first (no reader: ENXIO).
class FakeDevice {
 public:
  FakeDevice(const testing::TempDir& dir, const std::string& name)
      : path_(dir.path() + "/" + name) {
    EXPECT_EQ(::mkfifo(path_.c_str(), 0600), 0) << std::strerror(errno);
  }
  void Write(std::string_view bytes) {
    if (!writer_.valid()) writer_.Reset(::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    ASSERT_TRUE(writer_.valid()) << path_ << ": " << std::strerror(errno);
    ASSERT_EQ(::write(writer_.fd(), bytes.data(), bytes.size()),
              static_cast<ssize_t>(bytes.size()));
  }
  void CloseWriter() { writer_.Reset(); }

 private:
  std::string path_;
  UniqueFd writer_;
};

class EvdevInputTest : public ::testing::Test {
 protected:
  Result<std::unique_ptr<InputSource>> Make() {
    return MakeInputSource("evdev:" + dir_.path(), InputSourceEnv{&clock_, nullptr});
  }

  testing::TempDir dir_;
  SimulatedClock clock_{At(1700000000)};
};

TEST_F(EvdevInputTest, NoDevicesIsAnErrorNamingTheDirectory) {
  dir_.Write("mice", "");  // not an event* node
  Result<std::unique_ptr<InputSource>> r = Make();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "evdev: no event devices in " + dir_.path());

  r = MakeInputSource("evdev:" + dir_.path() + "/absent");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr(dir_.path() + "/absent"));
}

TEST_F(EvdevInputTest, UnreadableDevicesAskForRootOrTheInputGroup) {
  if (::geteuid() == 0) GTEST_SKIP() << "root opens a mode 000 file";
  const std::string path = dir_.Write("event3", "");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  Result<std::unique_ptr<InputSource>> r = Make();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr(dir_.path()));
  EXPECT_THAT(r.status().message(), HasSubstr("event3: Permission denied"));
  EXPECT_THAT(r.status().message(), HasSubstr("root or in the input group"));
}

TEST_F(EvdevInputTest, DevicesThatCannotBeOpenedAreNamed) {
  // A node that went away between the listing and the open.
  ASSERT_EQ(::symlink("/nonexistent/event9", (dir_.path() + "/event9").c_str()), 0);
  Result<std::unique_ptr<InputSource>> r = Make();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), "evdev: cannot open any of the 1 event devices in " +
                                      dir_.path() + " (event9: No such file or directory)");
}

TEST_F(EvdevInputTest, ReadsRecordedEventsFromADevice) {
  FakeDevice device(dir_, "event0");
  Result<std::unique_ptr<InputSource>> source = Make();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  InputSource& input = **source;
  EXPECT_EQ(input.Describe(), dir_.path() + " (1 device)");
  EXPECT_EQ(input.LastInput(), std::nullopt);  // no writer yet: end of file, no input

  device.Write(Bytes({Event(1700000010, 20, EV_KEY, KEY_A), Event(1700000010, 20, EV_SYN)}));
  EXPECT_EQ(input.LastInput(), At(1700000010, 20));
  EXPECT_EQ(input.LastInput(), At(1700000010, 20));  // drained; kept

  // A record in two writes counts once whole.
  std::string motion = Bytes({Event(1700000011, 5, EV_REL, REL_Y, -3)});
  device.Write(motion.substr(0, 9));
  EXPECT_EQ(input.LastInput(), At(1700000010, 20));
  device.Write(motion.substr(9));
  EXPECT_EQ(input.LastInput(), At(1700000011, 5));

  // The latest seen so far: an older event does not take it back; a flood
  // larger than one read is read to its end.
  device.Write(Bytes({Event(1700000001, 0, EV_KEY, KEY_B)}));
  EXPECT_EQ(input.LastInput(), At(1700000011, 5));
  std::string flood;
  for (int i = 0; i < 200; ++i) flood += Bytes({Event(1700000020 + i, 0, EV_ABS, ABS_X, i)});
  device.Write(flood);
  EXPECT_EQ(input.LastInput(), At(1700000219));

  // The writer going away is not the device going away.
  device.CloseWriter();
  EXPECT_EQ(input.LastInput(), At(1700000219));
  EXPECT_EQ(input.Describe(), dir_.path() + " (1 device)");
}

TEST_F(EvdevInputTest, DevicesThatAppearLaterAreOpenedAtTheNextLook) {
  FakeDevice first(dir_, "event0");
  Result<std::unique_ptr<InputSource>> source = Make();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  InputSource& input = **source;

  FakeDevice plugged(dir_, "event7");
  clock_.Advance(Millis(1999));
  EXPECT_EQ(input.LastInput(), std::nullopt);
  EXPECT_EQ(input.Describe(), dir_.path() + " (1 device)");
  clock_.Advance(Millis(1));
  EXPECT_EQ(input.LastInput(), std::nullopt);
  EXPECT_EQ(input.Describe(), dir_.path() + " (2 devices)");
  plugged.Write(Bytes({Event(1700000002, 0, EV_KEY, KEY_ENTER)}));
  EXPECT_EQ(input.LastInput(), At(1700000002));
}

// ---- logind ----------------------------------------------------------------

TEST(ParseLogindSessionTest, IdleSession) {
  Result<LogindIdle> r = ParseLogindSession(
      "IdleHint=yes\nIdleSinceHint=1700000000123456\nType=wayland\nActive=yes\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->idle);
  EXPECT_EQ(r->idle_since, TimeFromMicros(1700000000123456));
  EXPECT_EQ(r->type, "wayland");
  EXPECT_TRUE(r->active);
}

TEST(ParseLogindSessionTest, BusySessionAndOtherKeys) {
  Result<LogindIdle> r =
      ParseLogindSession("Id=4\nIdleHint=no\nIdleSinceHint=0\nType=x11\nActive=no\n\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->idle);
  EXPECT_EQ(r->idle_since, std::nullopt);
  EXPECT_EQ(r->type, "x11");
  EXPECT_FALSE(r->active);
}

TEST(ParseLogindSessionTest, MalformedLinesAreNamed) {
  Result<LogindIdle> r = ParseLogindSession("IdleHint=no\nFailed to get session\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("line 2 \"Failed to get session\""));

  r = ParseLogindSession("IdleHint=maybe\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("line 1 \"IdleHint=maybe\""));

  r = ParseLogindSession("IdleHint=yes\nIdleSinceHint=17e9\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("\"IdleSinceHint=17e9\""));

  r = ParseLogindSession("Type=x11\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("IdleHint"));
}

// loginctl as recorded, answering by its arguments; counts its runs.
class FakeLoginctl {
 public:
  void Answer(const std::string& args, std::string out) {
    answers_.insert_or_assign(args, Result<std::string>(std::move(out)));
  }
  void Fail(const std::string& args, Status status) {
    answers_.insert_or_assign(args, Result<std::string>(std::move(status)));
  }
  int runs() const { return runs_; }

  InputSourceEnv Env(const Clock* clock) {
    return InputSourceEnv{clock, [this](const std::vector<std::string>& argv, Duration) {
                            ++runs_;
                            std::string args;
                            for (size_t i = 1; i < argv.size(); ++i) {
                              args += (i > 1 ? " " : "") + argv[i];
                            }
                            EXPECT_EQ(argv[0], "loginctl");
                            auto it = answers_.find(args);
                            return it != answers_.end()
                                       ? it->second
                                       : Result<std::string>(FailedPrecondition(
                                             "loginctl exited with code 1: no answer for " + args));
                          }};
  }

 private:
  std::map<std::string, Result<std::string>> answers_;
  int runs_ = 0;
};

constexpr const char* kShow = " -p IdleHint -p IdleSinceHint -p Type -p Active";

class LogindInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Recorded on a desktop: the owner's wayland session, the greeter on
    // another VT, and an ssh login (tty: never counts).
    loginctl_.Answer("list-sessions --no-legend",
                     "      2 1000 alice seat0 tty2\n     c1  120 gdm   seat0 tty1\n"
                     "      7 1000 alice -     pts/0\n");
    Session("2", "IdleHint=no\nIdleSinceHint=1699999000000000\nType=wayland\nActive=yes\n");
    Session("c1", "IdleHint=yes\nIdleSinceHint=1699990000000000\nType=wayland\nActive=no\n");
    Session("7", "IdleHint=no\nIdleSinceHint=0\nType=tty\nActive=yes\n");
  }
  void Session(const std::string& id, std::string shown) {
    loginctl_.Answer("show-session " + id + kShow, std::move(shown));
  }
  Result<std::unique_ptr<InputSource>> Make() {
    return MakeInputSource("logind", loginctl_.Env(&clock_));
  }

  FakeLoginctl loginctl_;
  SimulatedClock clock_{At(1700000000)};
};

TEST_F(LogindInputTest, ActiveSessionNotIdleIsInputNowAskedOnceASecond) {
  Result<std::unique_ptr<InputSource>> source = Make();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  InputSource& input = **source;
  EXPECT_EQ(loginctl_.runs(), 4);
  EXPECT_EQ(input.Describe(), "logind sessions 2, c1");
  EXPECT_EQ(input.LastInput(), At(1700000000));
  clock_.Advance(Millis(999));
  EXPECT_EQ(input.LastInput(), At(1700000000, 999000));  // cached, still "now"
  EXPECT_EQ(loginctl_.runs(), 4);

  // The owner left: the session went idle.
  Session("2", "IdleHint=yes\nIdleSinceHint=1700000000500000\nType=wayland\nActive=yes\n");
  clock_.Advance(Millis(1));
  EXPECT_EQ(input.LastInput(), At(1700000000, 999000));  // never backwards
  EXPECT_EQ(loginctl_.runs(), 8);
  Session("2", "IdleHint=yes\nIdleSinceHint=1700000005000000\nType=wayland\nActive=yes\n");
  clock_.Advance(Seconds(10));
  EXPECT_EQ(input.LastInput(), At(1700000005));
}

TEST_F(LogindInputTest, OnlyIdleHintsOfAnInactiveSession) {
  // The owner switched to the greeter's VT: their session's "not idle" is
  // stale; its IdleSinceHint and the greeter's hint are what is known.
  Session("2", "IdleHint=no\nIdleSinceHint=1699999000000000\nType=wayland\nActive=no\n");
  Result<std::unique_ptr<InputSource>> source = Make();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->LastInput(), At(1699999000));
}

TEST_F(LogindInputTest, AFailedQueryKeepsTheLastAnswerAndSaysWhy) {
  Result<std::unique_ptr<InputSource>> source = Make();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  InputSource& input = **source;
  Session("2", "IdleHint=yes\nIdleSinceHint=1699999500000000\nType=wayland\nActive=yes\n");
  clock_.Advance(Seconds(1));
  EXPECT_EQ(input.LastInput(), At(1700000000));
  loginctl_.Fail("list-sessions --no-legend",
                 FailedPrecondition("loginctl exited with code 1: Failed to connect to bus"));
  clock_.Advance(Seconds(1));
  EXPECT_EQ(input.LastInput(), At(1700000000));
  EXPECT_EQ(input.Describe(),
            "logind sessions 2, c1; last query failed: logind: loginctl exited with code 1: "
            "Failed to connect to bus");
}

TEST_F(LogindInputTest, MissingLoginctlOrNoSessionFails) {
  loginctl_.Answer("list-sessions --no-legend", "");
  Result<std::unique_ptr<InputSource>> r = Make();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("no session"));

  loginctl_.Fail("list-sessions --no-legend", NotFound("command not found: loginctl"));
  r = Make();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "logind: loginctl is not installed");
}

TEST_F(LogindInputTest, AutoFallsBackToLogindOrNamesBothReasons) {
  // Which one auto takes depends on this machine's /dev/input.
  loginctl_.Fail("list-sessions --no-legend", NotFound("command not found: loginctl"));
  Result<std::unique_ptr<InputSource>> r = MakeInputSource("auto", loginctl_.Env(&clock_));
  if (r.ok()) {
    EXPECT_THAT((*r)->Describe(), StartsWith("/dev/input ("));
  } else {
    EXPECT_THAT(r.status().message(), StartsWith("no owner input source: evdev: "));
    EXPECT_THAT(r.status().message(), HasSubstr("; logind: loginctl is not installed"));
  }
}

}  // namespace
}  // namespace drover::worker
