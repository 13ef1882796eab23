// DataClient over the chunk wire (src/wire/chunk_wire.h), with gRPC for discovery, DeleteChunks
// and servers that do not serve the wire. See NewDataClient in data_client.h.
#include <unistd.h>

#include <memory>
#include <mutex>
#include <vector>

#include "client/rpc/data_client.h"
#include "client/rpc/recv_buffers.h"
#include "common/logging.h"
#include "wire/chunk_wire.h"
#include "wire/connection.h"

namespace aquifer::client {
namespace {

using Clock = std::chrono::steady_clock;

// How long a server found without the wire is served over gRPC before it is asked again.
constexpr std::chrono::seconds kReprobe{30};

class WireDataClient final : public DataClient {
 public:
  WireDataClient(const std::string& address, std::unique_ptr<DataClient> grpc)
      : address_(address), grpc_(std::move(grpc)) {
    host_ = address.substr(0, address.rfind(':'));
    if (host_.size() >= 2 && host_.front() == '[' && host_.back() == ']') {
      host_ = host_.substr(1, host_.size() - 2);
    }
  }

  Status WriteChunk(const ChunkId& id, uint64_t version, uint64_t committed_version,
                    std::span<const std::byte> data, bool sync, const ChunkPlacement& placement,
                    Clock::time_point deadline) override {
    if (data.size() > wire::kMaxPayloadBytes) {
      return InvalidArgument("chunk of " + std::to_string(data.size()) + " bytes");
    }
    if (placement.k > UINT8_MAX || placement.m > UINT8_MAX || placement.pg_width > UINT16_MAX) {
      return InvalidArgument("placement out of range: pg_width " +
                             std::to_string(placement.pg_width));
    }
    wire::Request request;
    request.op = wire::Op::kWrite;
    request.sync = sync;
    request.id = id;
    request.version = version;
    request.committed_version = committed_version;
    request.payload_bytes = data.size();
    request.placement = {placement.pg_width, placement.pg_index,
                         static_cast<uint8_t>(placement.k), static_cast<uint8_t>(placement.m),
                         placement.replicated, placement.unit_bytes, placement.stripe_bytes};
    bool over_grpc = false;
    Result<ChunkData> r = Call(request, data, deadline, &over_grpc);
    if (over_grpc) {
      return grpc_->WriteChunk(id, version, committed_version, data, sync, placement, deadline);
    }
    return r.status();
  }

  Result<ChunkData> ReadChunk(const ChunkId& id, uint64_t max_version, uint64_t offset_bytes,
                              uint64_t length_bytes, Clock::time_point deadline) override {
    wire::Request request;
    request.op = wire::Op::kRead;
    request.id = id;
    request.version = max_version;
    request.offset_bytes = offset_bytes;
    request.length_bytes = length_bytes;
    bool over_grpc = false;
    Result<ChunkData> r = Call(request, {}, deadline, &over_grpc);
    if (over_grpc) return grpc_->ReadChunk(id, max_version, offset_bytes, length_bytes, deadline);
    return r;
  }

  Status DeleteChunks(InodeId inode, uint64_t from_stripe, uint64_t max_version,
                      Clock::time_point deadline) override {
    return grpc_->DeleteChunks(inode, from_stripe, max_version, deadline);
  }

  Result<WireEndpoint> GetWireEndpoint(Clock::time_point deadline) override {
    return grpc_->GetWireEndpoint(deadline);
  }

 private:
  // The pool of connections to the server's chunk wire: made after an Info call when none is
  // known (or when the server had no wire more than kReprobe ago). A null pool with
  // *over_grpc set means the server serves no wire. Errors: Info's.
  // *probed tells whether Info was asked just now. While a refusing wire is being waited out
  // (UseGrpcForAWhile), *over_grpc is set without asking.
  Result<std::shared_ptr<wire::ConnectionPool>> Pool(Clock::time_point deadline, bool* over_grpc,
                                                     bool* probed) {
    *probed = false;
    {
      std::lock_guard lock(mu_);
      if (Clock::now() < grpc_until_) {
        *over_grpc = true;
        return std::shared_ptr<wire::ConnectionPool>();
      }
      if (known_ && (pool_ != nullptr || Clock::now() < reprobe_at_)) {
        *over_grpc = pool_ == nullptr;
        return pool_;
      }
    }
    *probed = true;
    Result<WireEndpoint> asked = grpc_->GetWireEndpoint(deadline);
    if (!asked.ok()) return asked.status();
    std::lock_guard lock(mu_);
    if (pool_ == nullptr || pool_->port() != asked->port ||
        pool_->instance() != asked->instance) {
      pool_ = asked->port == 0 ? nullptr
                               : std::make_shared<wire::ConnectionPool>(host_, asked->port,
                                                                        asked->instance);
    }
    known_ = true;
    reprobe_at_ = Clock::now() + kReprobe;
    *over_grpc = pool_ == nullptr;
    return pool_;
  }

  // The server answers Info but its wire gives no connection (all its connection slots taken, a
  // firewall, a fault): calls go over gRPC for a while, 1 s after the first such failure,
  // doubling up to 64 s while they go on (a firewall that drops packets costs a connect timeout
  // per try).
  void UseGrpcForAWhile(const Status& why) {
    std::lock_guard lock(mu_);
    grpc_backoff_ = std::min<std::chrono::milliseconds>(grpc_backoff_ * 2, std::chrono::seconds(64));
    grpc_until_ = Clock::now() + grpc_backoff_;
    known_ = false;
    if (Clock::now() >= next_log_) {
      Logger("client")->warn("data server {}: no chunk wire connection ({}); using gRPC",
                             address_, why.message());
      next_log_ = Clock::now() + std::chrono::seconds(10);
    }
  }

  // Forgets the endpoint (the server restarted or went away): the next call asks Info again.
  void Forget() {
    std::lock_guard lock(mu_);
    known_ = false;
    if (pool_ != nullptr) pool_->DropIdle();
  }

  // Sends `request` (with `payload` for a write) and reads the reply; for a read, the returned
  // ChunkData holds the bytes. Sets *over_grpc (and returns nothing useful) when the server does
  // not serve the wire. Errors: the server's status; kUnavailable when it cannot be reached or a
  // connection fails; kInternal for a malformed reply.
  Result<ChunkData> Call(const wire::Request& request, std::span<const std::byte> payload,
                         Clock::time_point deadline, bool* over_grpc) {
    Status last = Unavailable("data server " + address_ + ": no attempt");
    for (int attempt = 0; attempt < 3; ++attempt) {
      bool probed = false;
      Result<std::shared_ptr<wire::ConnectionPool>> pool = Pool(deadline, over_grpc, &probed);
      if (!pool.ok()) return pool.status();
      if (*over_grpc) return last;
      bool reused = false;
      Result<wire::Conn> conn = (*pool)->Acquire(deadline, &reused);
      if (!conn.ok() && probed) {
        // The server answered Info a moment ago, yet its wire gives no connection.
        UseGrpcForAWhile(conn.status());
        *over_grpc = true;
        return last;
      }
      if (!conn.ok()) {
        // Refused, or another process's hello: the server may have restarted on a new port.
        Forget();
        last = Unavailable("data server " + address_ + ": " + conn.status().message());
        if (Clock::now() >= deadline) break;
        continue;
      }
      {
        std::lock_guard lock(mu_);
        grpc_backoff_ = std::chrono::milliseconds(500);  // connections work again
      }
      bool answered = false;  // the reply header came: the request reached the server
      bool reusable = false;  // the whole reply was read: the connection is in step
      Result<ChunkData> r = Exchange(*conn, request, payload, deadline, &answered, &reusable);
      if (reusable) (*pool)->Release(std::move(*conn));  // else it closes here
      if (answered || r.ok() || r.status().code() != Code::kUnavailable) return r;
      last = r.status();
      if (!reused || Clock::now() >= deadline) break;
      // An idle connection that broke between its check and the request (a server restart):
      // ask again, on a new connection.
      Forget();
    }
    return last;
  }

  // One request and its reply on `conn`. Sets *answered once the reply header arrived, and
  // *reusable when the whole reply was read and well formed (the connection can carry another).
  Result<ChunkData> Exchange(wire::Conn& conn, const wire::Request& request,
                             std::span<const std::byte> payload, Clock::time_point deadline,
                             bool* answered, bool* reusable) {
    const auto head = wire::EncodeRequest(request);
    iovec out[2] = {{const_cast<std::byte*>(head.data()), head.size()},
                    {const_cast<std::byte*>(payload.data()), payload.size()}};
    auto failed = [&](const Status& s) {
      return Unavailable("data server " + address_ + ": " + s.message());
    };
    auto malformed = [&](const std::string& what) {
      return Internal("data server " + address_ + ": malformed chunk wire reply: " + what);
    };
    Status s = wire::SendAll(conn, out, 2, deadline);
    if (!s.ok()) return failed(s);
    std::array<std::byte, wire::kReplyBytes> frame;
    s = wire::RecvAll(conn, frame, deadline, /*wait_first=*/true);
    if (!s.ok()) return failed(s);
    *answered = true;
    Result<wire::Reply> reply = wire::DecodeReply(frame);
    if (!reply.ok()) return malformed(reply.status().message());
    std::string message(reply->message_bytes, '\0');
    s = wire::RecvAll(conn, std::as_writable_bytes(std::span<char>(message.data(), message.size())),
                      deadline);
    if (!s.ok()) return failed(s);
    if (reply->code != Code::kOk) {
      *reusable = true;  // DecodeReply checked that no data follows an error
      return Status(reply->code, message);
    }
    if (request.op == wire::Op::kWrite) {
      if (reply->data_bytes != 0) return malformed("a write reply with data");
      *reusable = true;
      return ChunkData{};
    }
    if (request.length_bytes != 0 && reply->data_bytes > request.length_bytes) {
      return malformed(std::to_string(reply->data_bytes) + " bytes for a read of " +
                       std::to_string(request.length_bytes));
    }
    // The one copy of the bytes in the client: from the socket to where the cache keeps them,
    // in a recycled buffer whose pages are already there (recv_buffers.h).
    std::shared_ptr<std::byte[]> buffer = RecvBuffer(reply->data_bytes);
    s = wire::RecvAll(conn, std::span<std::byte>(buffer.get(), reply->data_bytes), deadline);
    if (!s.ok()) return failed(s);
    *reusable = true;
    ChunkData data;
    data.version = reply->version;
    data.chunk_length_bytes = reply->chunk_length_bytes;
    data.stripe_bytes = reply->stripe_bytes;
    std::vector<std::span<const std::byte>> pieces;
    if (reply->data_bytes > 0) pieces.emplace_back(buffer.get(), reply->data_bytes);
    data.bytes = ChunkBytes(std::move(pieces), std::shared_ptr<const void>(buffer, buffer.get()));
    return data;
  }

  const std::string address_;
  std::string host_;
  std::unique_ptr<DataClient> grpc_;

  std::mutex mu_;  // guards the six below
  bool known_ = false;
  std::shared_ptr<wire::ConnectionPool> pool_;  // null: no wire (or not asked yet)
  Clock::time_point reprobe_at_;
  Clock::time_point grpc_until_;  // every call over gRPC before this (UseGrpcForAWhile)
  std::chrono::milliseconds grpc_backoff_{500};  // doubled by each UseGrpcForAWhile
  Clock::time_point next_log_;
};

}  // namespace

std::unique_ptr<DataClient> NewDataClient(const std::string& address, bool use_wire,
                                          CapabilitySource capabilities) {
  std::unique_ptr<DataClient> grpc = NewGrpcDataClient(address, std::move(capabilities));
  if (!use_wire) return grpc;
  return std::make_unique<WireDataClient>(address, std::move(grpc));
}

}  // namespace aquifer::client
