// The metadata wire's call frames: round trips, a table of malformed headers, random bytes.
#include "wire/meta_wire.h"

#include <gtest/gtest.h>

#include <random>

namespace aquifer::wire {
namespace {

TEST(MetaWireTest, CallFramesRoundTrip) {
  Result<CallHeader> c = DecodeCall(EncodeCall({MetaMethod::kReadDir, 123456}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->method, MetaMethod::kReadDir);
  EXPECT_EQ(c->payload_bytes, 123456u);
  Result<CallReplyHeader> r = DecodeCallReply(EncodeCallReply({CallOutcome::kOk, 77}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outcome, CallOutcome::kOk);
  EXPECT_EQ(r->payload_bytes, 77u);
  r = DecodeCallReply(EncodeCallReply({CallOutcome::kUnknownMethod, 0}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, CallOutcome::kUnknownMethod);
}

TEST(MetaWireTest, MalformedHeadersAreRefusedWithTheReason) {
  struct Case {
    size_t at;
    uint8_t value;
    const char* reason;
  };
  const auto call = EncodeCall({MetaMethod::kLookup, 10});
  for (const Case& c : {Case{0, 'x', "magic"}, Case{4, 0, "method 0"}, Case{4, 200, "method"},
                        Case{5, 1, "method"}, Case{6, 1, "reserved"}, Case{13, 1, "reserved"},
                        Case{11, 0x10, "payload"}}) {
    auto f = call;
    f[c.at] = std::byte{c.value};
    Result<CallHeader> h = DecodeCall(f);
    ASSERT_FALSE(h.ok()) << "byte " << c.at;
    EXPECT_EQ(h.status().code(), Code::kInvalidArgument);
    EXPECT_NE(h.status().message().find(c.reason), std::string::npos) << h.status().message();
  }
  const auto reply = EncodeCallReply({CallOutcome::kOk, 10});
  for (const Case& c : {Case{0, 'x', "magic"}, Case{4, 3, "outcome"}, Case{5, 1, "reserved"},
                        Case{15, 1, "reserved"}, Case{11, 0x10, "payload"}}) {
    auto f = reply;
    f[c.at] = std::byte{c.value};
    Result<CallReplyHeader> h = DecodeCallReply(f);
    ASSERT_FALSE(h.ok()) << "byte " << c.at;
    EXPECT_NE(h.status().message().find(c.reason), std::string::npos) << h.status().message();
  }
  EXPECT_NE(DecodeCallReply(EncodeCallReply({CallOutcome::kBadRequest, 5}))
                .status()
                .message()
                .find("a payload with outcome"),
            std::string::npos);
  EXPECT_FALSE(DecodeCall(std::span(call).first(15)).ok());
}

// Random headers: no crash, and only canonical frames decode (each byte means something).
TEST(MetaWireTest, RandomHeadersNeverCrashAndOnlyCanonicalOnesDecode) {
  std::mt19937_64 random(99);
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::array<std::byte, kCallHeaderBytes> f;
    for (auto& b : f) b = static_cast<std::byte>(random());
    if (i % 2 == 0) {  // a valid magic and zero reserved bytes, so the later checks run
      const auto base = EncodeCall({MetaMethod::kLookup, 0});
      for (size_t j : {0, 1, 2, 3, 5, 6, 7, 11, 12, 13, 14, 15}) f[j] = base[j];
      f[4] = static_cast<std::byte>(random() % 40);
    }
    if (Result<CallHeader> h = DecodeCall(f); h.ok()) {
      ++accepted;
      EXPECT_EQ(EncodeCall(*h), f);
    }
    if (Result<CallReplyHeader> h = DecodeCallReply(f); h.ok()) EXPECT_EQ(EncodeCallReply(*h), f);
  }
  EXPECT_GT(accepted, 10000);
}

}  // namespace
}  // namespace aquifer::wire
