#include "net/http_types.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "net/json_text.h"

namespace drover::net {
namespace {

TEST(PrintableTest, EscapesControlBytesAndInvalidUtf8KeepsText) {
  EXPECT_EQ(Printable("/api/v1/jobs"), "/api/v1/jobs");
  EXPECT_EQ(Printable("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");
  EXPECT_EQ(Printable("/assets/\xff"), "/assets/\\xff");
  EXPECT_EQ(Printable(std::string("a\0b\nc\x7f", 6)), "a\\x00b\\x0ac\\x7f");
  EXPECT_EQ(Printable("back\\slash"), "back\\\\slash");
  // Overlong, surrogate, beyond U+10FFFF, truncated.
  EXPECT_EQ(Printable("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(Printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(Printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  EXPECT_EQ(Printable("\xe2\x9c"), "\\xe2\\x9c");
  EXPECT_EQ(Printable(std::string(300, 'x'), 10), "xxxxxxxxxx...");
}

TEST(PrintableTest, CleanTextIsUtf8WithoutControls) {
  EXPECT_TRUE(IsCleanText(""));
  EXPECT_TRUE(IsCleanText("running"));
  EXPECT_TRUE(IsCleanText("\xc3\xa9t\xc3\xa9"));
  EXPECT_FALSE(IsCleanText("\xff"));
  EXPECT_FALSE(IsCleanText(std::string("a\0b", 3)));
  EXPECT_FALSE(IsCleanText("a\tb"));
}

TEST(ErrorResponseTest, InvalidUtf8InTheMessageIsReplacedNotThrown) {
  // The message that once crashed the server: "no dashboard file at /assets/\xff".
  Response r = ErrorResponse(404, StatusCode::kNotFound, "no dashboard file at /assets/\xff");
  EXPECT_EQ(r.status, 404);
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.body;
  EXPECT_EQ(j["error"]["message"], "no dashboard file at /assets/\xef\xbf\xbd");
  EXPECT_EQ(StatusFromResponse(r).code(), StatusCode::kNotFound);
}

TEST(JsonTextTest, NeverThrows) {
  nlohmann::json j = {{"bad", std::string("\xff\xfe", 2)}, {"ok", "x"}};
  EXPECT_EQ(JsonText(j), "{\"bad\":\"\xef\xbf\xbd\xef\xbf\xbd\",\"ok\":\"x\"}");
  EXPECT_EQ(JsonText(nlohmann::json{{"a", 1}}, 1), "{\n \"a\": 1\n}");
}

TEST(PercentEncodeTest, KeepsUnreservedBytesAndRoundTrips) {
  EXPECT_EQ(PercentEncode("ana_1.b-c~"), "ana_1.b-c~");
  EXPECT_EQ(PercentEncode("a b&limit=1"), "a%20b%26limit%3D1");
  const std::string bytes("\x00\xff/%+\n", 6);
  EXPECT_EQ(PercentDecode(PercentEncode(bytes), true), bytes);
}

}  // namespace
}  // namespace drover::net
