// libFuzzer target: wire::DecodeReply (chunk_wire.h), what a client reads from a data server.
#include <algorithm>
#include <span>

#include "fuzz_common.h"
#include "wire/chunk_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace aquifer::wire;
  const auto bytes = std::as_bytes(std::span(data, size));
  aquifer::Result<Reply> r = DecodeReply(bytes);
  if (!r.ok()) {
    AQ_FUZZ_CHECK(r.status().code() == aquifer::Code::kInvalidArgument);
    return 0;
  }
  const auto again = EncodeReply(*r);
  AQ_FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin(), bytes.end()));
  AQ_FUZZ_CHECK(r->message_bytes <= kMaxMessageBytes);
  AQ_FUZZ_CHECK(r->data_bytes <= kMaxPayloadBytes);
  AQ_FUZZ_CHECK(r->code == aquifer::Code::kOk || r->data_bytes == 0);
  return 0;
}
