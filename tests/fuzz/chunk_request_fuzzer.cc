// libFuzzer target: wire::DecodeRequest (chunk_wire.h). An accepted request is canonical and
// within every limit the header promises (payload, pg_width, inode, op).
#include <algorithm>
#include <span>

#include "fuzz_common.h"
#include "wire/chunk_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace aquifer::wire;
  const auto bytes = std::as_bytes(std::span(data, size));
  aquifer::Result<Request> r = DecodeRequest(bytes);
  if (!r.ok()) {
    AQ_FUZZ_CHECK(r.status().code() == aquifer::Code::kInvalidArgument);
    return 0;
  }
  const auto again = EncodeRequest(*r);
  AQ_FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin(), bytes.end()));
  AQ_FUZZ_CHECK(r->payload_bytes <= kMaxPayloadBytes);
  AQ_FUZZ_CHECK(r->op == Op::kWrite || r->payload_bytes == 0);
  AQ_FUZZ_CHECK(r->placement.pg_width <= UINT16_MAX);
  AQ_FUZZ_CHECK(r->id.inode.value() != 0);
  return 0;
}
