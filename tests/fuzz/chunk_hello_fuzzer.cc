// libFuzzer target: wire::DecodeHello (chunk_wire.h). An accepted hello re-encodes to the very
// bytes it came from; a refusal is kInvalidArgument.
#include <algorithm>
#include <span>

#include "fuzz_common.h"
#include "wire/chunk_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace aquifer::wire;
  const auto bytes = std::as_bytes(std::span(data, size));
  aquifer::Result<Hello> h = DecodeHello(bytes);
  if (!h.ok()) {
    AQ_FUZZ_CHECK(h.status().code() == aquifer::Code::kInvalidArgument);
    return 0;
  }
  const auto again = EncodeHello(*h);
  AQ_FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin(), bytes.end()));
  return 0;
}
