// libFuzzer target: wire::DecodeCall and wire::DecodeCallReply (meta_wire.h) on the same bytes.
#include <algorithm>
#include <span>

#include "fuzz_common.h"
#include "wire/meta_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace aquifer::wire;
  const auto bytes = std::as_bytes(std::span(data, size));
  if (aquifer::Result<CallHeader> h = DecodeCall(bytes); h.ok()) {
    const auto again = EncodeCall(*h);
    AQ_FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin(), bytes.end()));
    AQ_FUZZ_CHECK(h->payload_bytes <= kMaxCallPayloadBytes);
    const auto m = static_cast<uint16_t>(h->method);
    AQ_FUZZ_CHECK(m >= 1 && m < static_cast<uint16_t>(MetaMethod::kEnd));
  } else {
    AQ_FUZZ_CHECK(h.status().code() == aquifer::Code::kInvalidArgument);
  }
  if (aquifer::Result<CallReplyHeader> h = DecodeCallReply(bytes); h.ok()) {
    const auto again = EncodeCallReply(*h);
    AQ_FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin(), bytes.end()));
    AQ_FUZZ_CHECK(h->payload_bytes <= kMaxCallPayloadBytes);
    AQ_FUZZ_CHECK(h->outcome == CallOutcome::kOk || h->payload_bytes == 0);
  } else {
    AQ_FUZZ_CHECK(h.status().code() == aquifer::Code::kInvalidArgument);
  }
  return 0;
}
