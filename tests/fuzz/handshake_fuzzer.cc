// libFuzzer target: the cluster-key handshake's parsers. The first 16 bytes go to DecodeHello
// (what a client reads first); the rest is a client's answer to a fixed challenge, checked by
// CheckHandshakeAnswer (connection.h), which must refuse it unless it is the one right answer.
#include <algorithm>
#include <span>

#include "common/cluster_key.h"
#include "fuzz_common.h"
#include "wire/chunk_wire.h"
#include "wire/connection.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace aquifer;
  const auto bytes = std::as_bytes(std::span(data, size));
  const size_t hello_bytes = std::min(size, wire::kHelloBytes);
  if (Result<wire::Hello> h = wire::DecodeHello(bytes.first(hello_bytes)); !h.ok()) {
    AQ_FUZZ_CHECK(h.status().code() == Code::kInvalidArgument);
  }
  ClusterKey key;
  key.bytes.fill(std::byte{1});
  Nonce server_nonce;
  server_nonce.fill(std::byte{2});
  const auto answer = bytes.subspan(hello_bytes);
  Nonce client_nonce{};
  const Status s = wire::CheckHandshakeAnswer(key, 77, server_nonce, answer, &client_nonce);
  if (s.ok()) {
    // Accepted: it must be exactly the client nonce it carries and its right proof.
    AQ_FUZZ_CHECK(answer.size() == kNonceBytes + kMacBytes);
    AQ_FUZZ_CHECK(std::equal(client_nonce.begin(), client_nonce.end(), answer.begin()));
    const Mac want = WireClientProof(key, 77, server_nonce, client_nonce);
    AQ_FUZZ_CHECK(std::equal(want.begin(), want.end(), answer.begin() + kNonceBytes));
  } else {
    AQ_FUZZ_CHECK(s.code() == Code::kPermissionDenied);
  }
  return 0;
}
