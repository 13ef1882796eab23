// gRPC implementation of DataClient. The only file of the client library that sees data.proto.
#include "client/rpc/data_client.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <cstring>
#include <deque>

#include "aquifer/units.h"
#include "data.grpc.pb.h"
#include "common/rpc/rpc_auth.h"

namespace aquifer::client {
namespace {

namespace pb = ::aquifer::rpc;

// `resp` is read only after the call returned (argument order is unspecified in C++).
template <class Resp>
Status FromRpc(const grpc::Status& transport, const Resp* resp, const std::string& address) {
  const pb::RpcStatus& status = resp->status();
  if (!transport.ok()) {
    return Unavailable("data server " + address + ": " + transport.error_message());
  }
  if (status.code() == 0) return OkStatus();
  return Status(CodeFromInt(status.code()), status.message());
}

// gRPC deadlines take the system clock; the library measures time on the steady clock.
std::chrono::system_clock::time_point ToSystem(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             deadline - std::chrono::steady_clock::now());
}

void ToPb(const ChunkId& id, pb::ChunkKey* key) {
  key->set_ino(id.inode.value());
  key->set_stripe(id.stripe);
  key->set_position(id.position);
}

// A WriteChunk request as gRPC slices: every field but `data` serialized by protobuf, then
// data's tag and length, then the payload itself as a slice over the caller's buffer, which gRPC
// writes to the socket from where it is (no copy into a protobuf string, none into gRPC's
// buffers). Protobuf's wire format lets fields come in any order, so the server parses it as a
// plain WriteChunkRequest. `data` must outlive the call (the call is synchronous).
grpc::ByteBuffer WriteChunkBuffer(const pb::WriteChunkRequest& head,
                                  std::span<const std::byte> data) {
  namespace io = google::protobuf::io;
  using google::protobuf::internal::WireFormatLite;
  std::string prefix;
  head.SerializeToString(&prefix);  // head.data() is empty: proto3 leaves the field out
  {
    io::StringOutputStream stream(&prefix);  // appends
    io::CodedOutputStream out(&stream);
    out.WriteTag(WireFormatLite::MakeTag(pb::WriteChunkRequest::kDataFieldNumber,
                                         WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    out.WriteVarint32(static_cast<uint32_t>(data.size()));
  }
  grpc::Slice slices[2] = {grpc::Slice(prefix),
                           grpc::Slice(data.data(), data.size(), grpc::Slice::STATIC_SLICE)};
  return grpc::ByteBuffer(slices, data.empty() ? 1 : 2);
}

class GrpcDataClient final : public DataClient {
 public:
  GrpcDataClient(const std::string& address, CapabilitySource capabilities)
      : address_(address), capabilities_(std::move(capabilities)) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(kMaxRpcMessageBytes));
    args.SetMaxSendMessageSize(static_cast<int>(kMaxRpcMessageBytes));
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kRpcConnectTimeoutMs);  // connect timeout
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    channel_ = NewAuthChannel(address, args);
    stub_ = pb::DataService::NewStub(channel_);
    generic_ = std::make_unique<grpc::GenericStub>(channel_);
  }

  Status WriteChunk(const ChunkId& id, uint64_t version, uint64_t committed_version,
                    std::span<const std::byte> data, bool sync, const ChunkPlacement& placement,
                    std::chrono::steady_clock::time_point deadline) override {
    Status s = WriteChunkOnce(id, version, committed_version, data, sync, placement, deadline,
                              /*fresh=*/false);
    // A capability refused by the data server (expired on its clock, or the credential was
    // re-checked): take a fresh one from the metadata server and try once more.
    if (IsCapabilityRefusal(s)) {
      s = WriteChunkOnce(id, version, committed_version, data, sync, placement, deadline,
                         /*fresh=*/true);
    }
    return s;
  }

  Status WriteChunkOnce(const ChunkId& id, uint64_t version, uint64_t committed_version,
                        std::span<const std::byte> data, bool sync,
                        const ChunkPlacement& placement,
                        std::chrono::steady_clock::time_point deadline, bool fresh) {
    pb::WriteChunkRequest req;
    if (capabilities_) {
      Result<std::string> cap = capabilities_(id.inode, /*write=*/true, fresh);
      if (!cap.ok()) return cap.status();
      req.set_capability(std::move(*cap));
    }
    ToPb(id, req.mutable_key());
    pb::ChunkPlacement* p = req.mutable_placement();
    p->set_pg_width(placement.pg_width);
    p->set_pg_index(placement.pg_index);
    p->set_k(placement.k);
    p->set_m(placement.m);
    p->set_unit_bytes(placement.unit_bytes);
    p->set_stripe_bytes(placement.stripe_bytes);
    p->set_replicated(placement.replicated);
    req.set_version(version);
    req.set_committed_version(committed_version);
    req.set_sync(sync);
    if (data.size() > kMaxRpcMessageBytes) {
      return InvalidArgument("chunk of " + std::to_string(data.size()) + " bytes");
    }
    const grpc::ByteBuffer request = WriteChunkBuffer(req, data);
    grpc::ByteBuffer reply;
    const grpc::Status transport =
        GenericCall("/aquifer.rpc.DataService/WriteChunk", request, &reply, deadline);
    pb::WriteChunkResponse resp;
    if (transport.ok()) {
      grpc::ProtoBufferReader reader(&reply);
      if (!resp.ParseFromZeroCopyStream(&reader)) {
        return Internal("data server " + address_ + ": unparsable WriteChunk reply");
      }
    }
    return FromRpc(transport, &resp, address_);
  }

  Result<ChunkData> ReadChunk(const ChunkId& id, uint64_t max_version, uint64_t offset_bytes,
                              uint64_t length_bytes,
                              std::chrono::steady_clock::time_point deadline) override {
    Result<ChunkData> r =
        ReadChunkOnce(id, max_version, offset_bytes, length_bytes, deadline, /*fresh=*/false);
    if (!r.ok() && IsCapabilityRefusal(r.status())) {
      r = ReadChunkOnce(id, max_version, offset_bytes, length_bytes, deadline, /*fresh=*/true);
    }
    return r;
  }

  Result<ChunkData> ReadChunkOnce(const ChunkId& id, uint64_t max_version, uint64_t offset_bytes,
                                  uint64_t length_bytes,
                                  std::chrono::steady_clock::time_point deadline, bool fresh) {
    pb::ReadChunkRequest req;
    ToPb(id, req.mutable_key());
    if (capabilities_) {
      Result<std::string> cap = capabilities_(id.inode, /*write=*/false, fresh);
      if (!cap.ok()) return cap.status();
      req.set_capability(std::move(*cap));
    }
    req.set_max_version(max_version);
    req.set_offset(offset_bytes);
    req.set_length(length_bytes);
    std::string serialized;
    req.SerializeToString(&serialized);
    grpc::Slice slice(serialized);
    const grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer reply;
    const grpc::Status transport =
        GenericCall("/aquifer.rpc.DataService/ReadChunk", request, &reply, deadline);
    if (!transport.ok()) {
      return Unavailable("data server " + address_ + ": " + transport.error_message());
    }
    // The reply's data stays in the slices it arrived in; the caller copies it out once.
    auto slices = std::make_shared<std::vector<grpc::Slice>>();
    if (!reply.Dump(slices.get()).ok()) {
      return Internal("data server " + address_ + ": unreadable ReadChunk reply");
    }
    std::vector<std::span<const std::byte>> pieces;
    pieces.reserve(slices->size());
    for (const grpc::Slice& piece : *slices) {
      pieces.emplace_back(reinterpret_cast<const std::byte*>(piece.begin()), piece.size());
    }
    return ParseReadChunkReply(std::move(pieces), std::move(slices), address_);
  }

  Result<WireEndpoint> GetWireEndpoint(std::chrono::steady_clock::time_point deadline) override {
    pb::DataServerInfoRequest req;
    pb::DataServerInfoResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(ToSystem(deadline));
    AQ_RETURN_IF_ERROR(FromRpc(stub_->Info(&ctx, req, &resp), &resp, address_));
    if (resp.wire_port() > UINT16_MAX) {
      return Internal("data server " + address_ + ": wire port " +
                      std::to_string(resp.wire_port()));
    }
    return WireEndpoint{static_cast<uint16_t>(resp.wire_port()), resp.wire_instance()};
  }

  Status DeleteChunks(InodeId inode, uint64_t from_stripe, uint64_t max_version,
                      std::chrono::steady_clock::time_point deadline) override {
    pb::DeleteChunksRequest req;
    pb::DeleteRange* range = req.add_ranges();
    range->set_ino(inode.value());
    range->set_from_stripe(from_stripe);
    range->set_max_version(max_version);
    pb::DeleteChunksResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(ToSystem(deadline));
    return FromRpc(stub_->DeleteChunks(&ctx, req, &resp), &resp, address_);
  }

 private:
  // One unary call of `method` through the generic stub (raw bytes both ways), on this thread.
  grpc::Status GenericCall(const std::string& method, const grpc::ByteBuffer& request,
                           grpc::ByteBuffer* reply,
                           std::chrono::steady_clock::time_point deadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToSystem(deadline));
    grpc::CompletionQueue cq;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
        generic_->PrepareUnaryCall(&ctx, method, request, &cq);
    call->StartCall();
    grpc::Status transport;
    call->Finish(reply, &transport, /*tag=*/nullptr);
    void* tag = nullptr;
    bool ok = false;
    const bool got = cq.Next(&tag, &ok);  // the call's only event: it has ended
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    if (!got) return grpc::Status(grpc::StatusCode::INTERNAL, "completion queue shut down");
    return transport;
  }

  // The data server's refusal of a chunk call for its capability (grpc_data_server.cc
  // CheckCapability words it so).
  bool IsCapabilityRefusal(const Status& s) const {
    return capabilities_ && s.code() == Code::kPermissionDenied &&
           s.message().find("capability") != std::string::npos;
  }

  std::string address_;
  const CapabilitySource capabilities_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::DataService::Stub> stub_;
  std::unique_ptr<grpc::GenericStub> generic_;  // WriteChunk, sent from the caller's buffer
};

}  // namespace

ChunkBytes::ChunkBytes(std::string bytes) {
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  size_ = owned->size();
  if (size_ > 0) pieces_.emplace_back(reinterpret_cast<const std::byte*>(owned->data()), size_);
  owners_.push_back(std::move(owned));
}

ChunkBytes::ChunkBytes(std::vector<std::span<const std::byte>> pieces,
                       std::shared_ptr<const void> owner)
    : pieces_(std::move(pieces)) {
  owners_.push_back(std::move(owner));
  for (const auto& piece : pieces_) size_ += piece.size();
}

template <class Fn>
void ChunkBytes::ForEachPiece(uint64_t offset, uint64_t length, Fn&& fn) const {
  for (const auto& piece : pieces_) {
    if (length == 0) return;
    if (offset >= piece.size()) {
      offset -= piece.size();
      continue;
    }
    const uint64_t n = std::min<uint64_t>(piece.size() - offset, length);
    fn(piece.subspan(offset, n));
    length -= n;
    offset = 0;
  }
}

void ChunkBytes::Slice(uint64_t offset, uint64_t length,
                       std::vector<std::span<const std::byte>>* out) const {
  ForEachPiece(offset, length, [out](std::span<const std::byte> piece) { out->push_back(piece); });
}

void ChunkBytes::CopyTo(uint64_t offset, std::span<std::byte> dst) const {
  std::byte* at = dst.data();
  ForEachPiece(offset, dst.size(), [&at](std::span<const std::byte> piece) {
    std::memcpy(at, piece.data(), piece.size());
    at += piece.size();
  });
}

void ChunkBytes::Append(const ChunkBytes& from, uint64_t offset, uint64_t length) {
  if (length == 0) return;
  from.Slice(offset, length, &pieces_);
  size_ += length;
  for (const auto& owner : from.owners_) {
    if (std::find(owners_.begin(), owners_.end(), owner) == owners_.end()) {
      owners_.push_back(owner);
    }
  }
}

namespace {
// Zeros for AppendZeros: static storage, only ever read, so its pages map the kernel's zero page.
constexpr uint64_t kZeroBlockBytes = 1 << 20;
std::byte zero_block[kZeroBlockBytes];
}  // namespace

void ChunkBytes::AppendZeros(uint64_t length) {
  size_ += length;
  while (length > 0) {
    const uint64_t n = std::min(length, kZeroBlockBytes);
    pieces_.emplace_back(zero_block, n);
    length -= n;
  }
}

std::string ChunkBytes::ToString() const {
  std::string out(size_, '\0');
  CopyTo(0, std::as_writable_bytes(std::span<char>(out.data(), out.size())));
  return out;
}

Result<ChunkData> ParseReadChunkReply(std::vector<std::span<const std::byte>> pieces,
                                      std::shared_ptr<const void> owner,
                                      const std::string& address) {
  namespace io = google::protobuf::io;
  using google::protobuf::internal::WireFormatLite;
  auto malformed = [&](const std::string& what) {
    return Internal("data server " + address + ": malformed ReadChunk reply (" + what + ")");
  };
  ChunkData out;
  pb::RpcStatus status;
  uint64_t data_at = 0, data_len = 0;  // where `data` is in the reply, bytes
  {
    // Protobuf's own streams over the pieces: one array stream each, read as one sequence.
    std::deque<io::ArrayInputStream> arrays;  // not movable: a deque keeps them in place
    std::vector<io::ZeroCopyInputStream*> streams;
    for (const auto& piece : pieces) {
      streams.push_back(&arrays.emplace_back(piece.data(), static_cast<int>(piece.size())));
    }
    io::ConcatenatingInputStream stream(streams.data(), static_cast<int>(streams.size()));
    io::CodedInputStream in(&stream);
    for (;;) {
      const uint32_t tag = in.ReadTag();
      if (tag == 0) {
        if (!in.ConsumedEntireMessage()) return malformed("bad tag");
        break;
      }
      const uint32_t field = WireFormatLite::GetTagFieldNumber(tag);
      const auto type = WireFormatLite::GetTagWireType(tag);
      const bool delimited = type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
      const bool varint = type == WireFormatLite::WIRETYPE_VARINT;
      switch (field) {
        case pb::ReadChunkResponse::kStatusFieldNumber: {
          uint32_t len = 0;
          std::string bytes;
          if (!delimited || !in.ReadVarint32(&len) ||
              !in.ReadString(&bytes, static_cast<int>(len)) || !status.ParseFromString(bytes)) {
            return malformed("status");
          }
          break;
        }
        case pb::ReadChunkResponse::kVersionFieldNumber:
          if (!varint || !in.ReadVarint64(&out.version)) return malformed("version");
          break;
        case pb::ReadChunkResponse::kChunkLengthFieldNumber:
          if (!varint || !in.ReadVarint64(&out.chunk_length_bytes)) {
            return malformed("chunk_length");
          }
          break;
        case pb::ReadChunkResponse::kPlacementFieldNumber: {
          uint32_t len = 0;
          std::string bytes;
          pb::ChunkPlacement placement;
          if (!delimited || !in.ReadVarint32(&len) ||
              !in.ReadString(&bytes, static_cast<int>(len)) || !placement.ParseFromString(bytes)) {
            return malformed("placement");
          }
          out.stripe_bytes = placement.stripe_bytes();
          break;
        }
        case pb::ReadChunkResponse::kDataFieldNumber: {
          uint32_t len = 0;
          if (!delimited || !in.ReadVarint32(&len)) return malformed("data");
          data_at = static_cast<uint64_t>(in.CurrentPosition());
          data_len = len;
          if (!in.Skip(static_cast<int>(len))) return malformed("data truncated");
          break;
        }
        default:
          if (!WireFormatLite::SkipField(&in, tag)) {
            return malformed("field " + std::to_string(field));
          }
      }
    }
  }
  if (status.code() != 0) return Status(CodeFromInt(status.code()), status.message());
  // The pieces that hold [data_at, data_at + data_len).
  std::vector<std::span<const std::byte>> data;
  uint64_t at = 0;
  for (const auto& piece : pieces) {
    const uint64_t b = std::max(at, data_at), e = std::min(at + piece.size(), data_at + data_len);
    if (b < e) data.push_back(piece.subspan(b - at, e - b));
    at += piece.size();
  }
  out.bytes = ChunkBytes(std::move(data), std::move(owner));
  return out;
}

std::unique_ptr<DataClient> NewGrpcDataClient(const std::string& address,
                                              CapabilitySource capabilities) {
  return std::make_unique<GrpcDataClient>(address, std::move(capabilities));
}

}  // namespace aquifer::client
