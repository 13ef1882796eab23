// aquifer-data's chunk wire listener (wire_server.h): a wire::Listener whose connections run
// read-request / call-the-store / write-reply until the peer closes.
#include "server/wire_server.h"

#include "server/data_metrics.h"

#include <algorithm>
#include <atomic>

#include "common/logging.h"
#include "wire/chunk_wire.h"
#include "wire/connection.h"

namespace aquifer::server {
namespace {

// A connection keeps each of its buffers up to this size between requests (bytes: a chunk of the
// default 1 MiB stripe unit and its CRC blocks); a larger one is freed after its request.
constexpr uint64_t kKeptBufferBytes = 2ull << 20;

ChunkPlacement FromWire(const wire::WirePlacement& p) {
  if (p.pg_width == 0) return ChunkPlacement{};
  return ChunkPlacement{static_cast<uint16_t>(p.pg_width), p.k, p.m, p.pg_index, p.unit_bytes,
                        p.replicated, p.stripe_bytes};
}

}  // namespace

struct WireServer::Impl {
  ChunkStore* store = nullptr;
  std::unique_ptr<wire::Listener> listener;
  std::atomic<uint64_t> served{0}, rejected{0};

  void Serve(wire::Conn& conn, const std::atomic<bool>& stopping);
  // One request on `conn` with its decoded header: runs it and sends the reply.
  // Errors: kUnavailable when the connection failed (the caller ends it).
  Status Handle(wire::Conn& conn, const wire::Request& request, const std::atomic<bool>& stopping,
                std::string* read_buf, std::string* write_buf);
};

Result<std::unique_ptr<WireServer>> WireServer::Start(const std::string& host, uint16_t port,
                                                      ChunkStore* store, uint64_t instance,
                                                      uint32_t max_connections) {
  auto impl = std::make_unique<Impl>();
  impl->store = store;
  Impl* raw = impl.get();
  Result<std::unique_ptr<wire::Listener>> listener = wire::Listener::Start(
      "chunk wire", host, port, instance,
      [raw](wire::Conn& conn, const std::atomic<bool>& stopping) { raw->Serve(conn, stopping); },
      max_connections);
  if (!listener.ok()) return listener.status();
  impl->listener = std::move(*listener);
  return std::unique_ptr<WireServer>(new WireServer(std::move(impl)));
}

WireServer::WireServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WireServer::~WireServer() { Shutdown(); }
void WireServer::Shutdown() { impl_->listener->Shutdown(); }
uint16_t WireServer::port() const { return impl_->listener->port(); }
uint64_t WireServer::instance() const { return impl_->listener->instance(); }
uint64_t WireServer::connections_accepted() const {
  return impl_->listener->connections_accepted();
}
uint64_t WireServer::requests_served() const { return impl_->served.load(); }
uint64_t WireServer::frames_rejected() const { return impl_->rejected.load(); }

void WireServer::Impl::Serve(wire::Conn& conn, const std::atomic<bool>& stopping) {
  std::string read_buf, write_buf;
  Status s = OkStatus();
  while (s.ok() && !stopping) {
    std::array<std::byte, wire::kRequestBytes> frame;
    s = wire::ReadFull(conn, frame, /*idle=*/true, stopping);
    if (!s.ok()) return;  // the peer closed, or shutdown
    Result<wire::Request> request = wire::DecodeRequest(frame);
    if (!request.ok()) {
      // The framing cannot be trusted after a bad header: say why, then end the connection.
      rejected.fetch_add(1);
      // At most one line per 10 s: a peer can send bad frames as fast as it can connect.
      static LogLimiter limiter;
      if (uint64_t held = 0; limiter.Allow(&held)) {
        Logger("data")->warn("chunk wire rejected a frame: {} ({} more since the last line)",
                             request.status().ToString(), held);
      }
      const std::string& text = request.status().message();
      const uint32_t n =
          static_cast<uint32_t>(std::min<size_t>(text.size(), wire::kMaxMessageBytes));
      const auto reply = wire::EncodeReply({Code::kInvalidArgument, n});
      iovec out[2] = {{const_cast<std::byte*>(reply.data()), reply.size()},
                      {const_cast<char*>(text.data()), n}};
      (void)wire::WriteFull(conn, out, 2);
      return;
    }
    s = Handle(conn, *request, stopping, &read_buf, &write_buf);
  }
}

Status WireServer::Impl::Handle(wire::Conn& conn, const wire::Request& request,
                                const std::atomic<bool>& stopping, std::string* read_buf,
                                std::string* write_buf) {
  wire::Reply reply;
  Status status = OkStatus();
  std::string_view data;
  const auto start = std::chrono::steady_clock::now();
  if (request.op == wire::Op::kWrite) {
    // Bytes that arrive here are the chunk; the store copies them to its file. The whole
    // payload must come within the frame timeout, and memory grows only as it comes.
    AQ_RETURN_IF_ERROR(wire::ReadPayload(
        conn, request.payload_bytes, write_buf,
        std::chrono::steady_clock::now() + std::chrono::seconds(wire::kFrameTimeoutSeconds)));
    status = store->Write(request.id, request.version, request.committed_version, *write_buf,
                          request.sync, FromWire(request.placement));
    if (write_buf->capacity() > kKeptBufferBytes) std::string().swap(*write_buf);
  } else {
    Result<ChunkReadInfo> r = store->Read(request.id, request.version, request.offset_bytes,
                                          request.length_bytes, read_buf);
    if (r.ok()) {
      reply.version = r->version;
      reply.chunk_length_bytes = r->chunk_length_bytes;
      reply.stripe_bytes = r->placement.known() ? r->placement.stripe_bytes : 0;
      reply.data_bytes = read_buf->size();
      data = *read_buf;
    } else {
      status = r.status();
    }
  }
  served.fetch_add(1);  // before the reply, so a client that saw it sees the count too
  const bool write = request.op == wire::Op::kWrite;
  CountChunkOp(write ? ChunkOp::kWrite : ChunkOp::kRead, ChunkWire::kChunkWire, status,
               !status.ok() ? 0 : write ? request.payload_bytes : data.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  const std::string& text = status.message();
  reply.code = status.code();
  reply.message_bytes = status.ok() ? 0
                                    : static_cast<uint32_t>(
                                          std::min<size_t>(text.size(), wire::kMaxMessageBytes));
  const auto head = wire::EncodeReply(reply);
  iovec out[3] = {{const_cast<std::byte*>(head.data()), head.size()},
                  {const_cast<char*>(text.data()), reply.message_bytes},
                  {const_cast<char*>(data.data()), data.size()}};
  Status sent = wire::WriteFull(conn, out, 3);
  if (read_buf->capacity() > kKeptBufferBytes) std::string().swap(*read_buf);
  return sent;
}

}  // namespace aquifer::server
