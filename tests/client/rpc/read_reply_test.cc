// ParseReadChunkReply and ChunkBytes (src/client/rpc/data_client.h): a ReadChunk reply parsed
// from the pieces it arrived in, however it was split, without copying its data; malformed
// replies give kInternal, never a crash or wrong bytes.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/rpc/data_client.h"
#include "data.pb.h"

namespace aquifer::client {
namespace {

using Pieces = std::vector<std::span<const std::byte>>;

std::string Bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// `wire` cut at `cuts` (ascending offsets) into pieces that point into `wire`.
Pieces Split(const std::string& wire, const std::vector<size_t>& cuts) {
  Pieces out;
  size_t at = 0;
  for (size_t cut : cuts) {
    out.emplace_back(reinterpret_cast<const std::byte*>(wire.data()) + at, cut - at);
    at = cut;
  }
  out.emplace_back(reinterpret_cast<const std::byte*>(wire.data()) + at, wire.size() - at);
  return out;
}

Result<ChunkData> Parse(const std::string& wire, const std::vector<size_t>& cuts = {}) {
  return ParseReadChunkReply(Split(wire, cuts), nullptr, "test:1");
}

std::string Reply(uint64_t version, uint64_t chunk_length, const std::string& data) {
  rpc::ReadChunkResponse r;
  r.mutable_status()->set_code(0);
  r.set_version(version);
  r.set_chunk_length(chunk_length);
  r.set_data(data);
  r.mutable_placement()->set_pg_width(6);
  r.mutable_placement()->set_stripe_bytes(2 * chunk_length + 1);
  return r.SerializeAsString();
}

TEST(ReadReplyTest, ParsesTheSameWhereverTheReplyIsSplit) {
  const std::string data = Bytes(200000, 1);
  const std::string wire = Reply(7, 300000, data);
  std::vector<std::vector<size_t>> splits = {{}, {1}, {2, 3, 4, 5}, {wire.size() - 1}};
  std::vector<size_t> every_4k;
  for (size_t at = 4096; at < wire.size(); at += 4096) every_4k.push_back(at);
  splits.push_back(every_4k);
  std::mt19937 rng(5);
  for (int round = 0; round < 50; ++round) {
    std::vector<size_t> cuts;
    for (size_t at = 1 + rng() % 40; at < wire.size(); at += 1 + rng() % 30000) cuts.push_back(at);
    splits.push_back(cuts);
  }
  for (const auto& cuts : splits) {
    Result<ChunkData> r = Parse(wire, cuts);
    ASSERT_TRUE(r.ok()) << r.status().ToString() << " with " << cuts.size() << " cuts";
    EXPECT_EQ(r->version, 7u);
    EXPECT_EQ(r->chunk_length_bytes, 300000u);
    EXPECT_EQ(r->stripe_bytes, 600001u);  // from the placement
    ASSERT_EQ(r->bytes.size(), data.size());
    EXPECT_TRUE(r->bytes.ToString() == data) << cuts.size() << " cuts";
  }
}

TEST(ReadReplyTest, CopyToReturnsAnyRangeAcrossPieces) {
  const std::string data = Bytes(10000, 2);
  const std::string wire = Reply(1, 10000, data);
  std::vector<size_t> cuts;
  for (size_t at = 3; at < wire.size(); at += 97) cuts.push_back(at);
  Result<ChunkData> r = Parse(wire, cuts);
  ASSERT_TRUE(r.ok());
  for (uint64_t offset : {0, 1, 96, 97, 5000, 9999}) {
    for (uint64_t len : {0, 1, 2, 200, 1000}) {
      if (offset + len > data.size()) continue;
      std::string got(len, '\0');
      r->bytes.CopyTo(offset, std::as_writable_bytes(std::span<char>(got.data(), got.size())));
      EXPECT_EQ(got, data.substr(offset, len)) << offset << "+" << len;
    }
  }
}

TEST(ReadReplyTest, TheServersErrorComesBackAsItsCode) {
  rpc::ReadChunkResponse r;
  r.mutable_status()->set_code(static_cast<int>(Code::kNotFound));
  r.mutable_status()->set_message("no version <= 5");
  Result<ChunkData> got = Parse(r.SerializeAsString());
  EXPECT_EQ(got.status().code(), Code::kNotFound);
  EXPECT_NE(got.status().message().find("no version <= 5"), std::string::npos);
}

TEST(ReadReplyTest, AnEmptyReplyIsAnEmptyChunkAndUnknownFieldsAreSkipped) {
  Result<ChunkData> empty = Parse("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->bytes.size(), 0u);
  // Field 9 (varint) and field 10 (bytes), unknown to this client, around the known ones.
  std::string wire = std::string("\x48\x05\x52\x03xyz", 7) + Reply(3, 4, "abcd");
  Result<ChunkData> r = Parse(wire);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->version, 3u);
  EXPECT_EQ(r->bytes.ToString(), "abcd");
}

TEST(ReadReplyTest, TruncatedRepliesAreRefused) {
  const std::string data = Bytes(300, 3);
  const std::string wire = Reply(9, 300, data);
  // The data field's payload is the tail of the message before the placement field.
  rpc::ReadChunkResponse tail;
  tail.mutable_placement()->set_pg_width(6);
  tail.mutable_placement()->set_stripe_bytes(2 * 300 + 1);  // as Reply() sets it
  const size_t data_end = wire.size() - tail.SerializeAsString().size();
  const size_t data_begin = data_end - data.size();
  for (size_t len = 0; len < wire.size(); ++len) {
    const std::vector<size_t> cuts =
        len > 2 ? std::vector<size_t>{len / 2} : std::vector<size_t>{};
    Result<ChunkData> r = Parse(wire.substr(0, len), cuts);
    if (len > data_begin && len < data_end) {
      EXPECT_EQ(r.status().code(), Code::kInternal) << "cut at " << len;
    }
    // Wherever it is cut, what parses never claims more bytes than arrived.
    if (r.ok()) {
      EXPECT_LE(r->bytes.size(), len);
    }
  }
}

TEST(ReadReplyTest, AKnownFieldWithTheWrongWireTypeIsRefused) {
  // version (field 2) sent as length-delimited; data (field 4) sent as a varint.
  EXPECT_EQ(Parse(std::string("\x12\x01\x07", 3)).status().code(), Code::kInternal);
  EXPECT_EQ(Parse(std::string("\x20\x07", 2)).status().code(), Code::kInternal);
  // A zero tag (field 0 does not exist).
  EXPECT_EQ(Parse(std::string("\x00\x01", 2)).status().code(), Code::kInternal);
  // A length past the end of the reply.
  EXPECT_EQ(Parse(std::string("\x22\x10\x01\x02", 4)).status().code(), Code::kInternal);
}

TEST(ReadReplyTest, RandomBytesNeverCrashAndNeverOverrun) {
  std::mt19937 rng(11);
  for (int i = 0; i < 20000; ++i) {
    std::string wire = Bytes(rng() % 64, static_cast<uint32_t>(i));
    std::vector<size_t> cuts;
    if (wire.size() > 2) cuts.push_back(1 + rng() % (wire.size() - 1));
    Result<ChunkData> r = Parse(wire, cuts);
    if (r.ok()) {
      EXPECT_LE(r->bytes.size(), wire.size());
    }
  }
}

// A stripe assembled from parts of several replies and runs of zeros (how the read cache holds
// a stripe without copying it) has the same bytes as the parts copied end to end, whatever
// range is sliced or copied out of it, and keeps the replies' memory alive after they are gone.
TEST(ReadReplyTest, AppendedPartsAndZerosSliceAndCopyLikeOneBuffer) {
  std::string model;
  ChunkBytes stripe;
  {
    auto a_owned = std::make_shared<const std::string>(Bytes(300000, 11));
    const std::string& a = *a_owned;
    const std::string b = Bytes(70000, 12);
    ChunkBytes ra(Split(a, {1000, 65536, 200001}), a_owned);
    ChunkBytes rb(b);
    stripe.Append(ra, 5, 250000);
    model += a.substr(5, 250000);
    stripe.AppendZeros(3 << 20);  // more than the static zero block: several pieces
    model += std::string(3 << 20, '\0');
    stripe.Append(rb, 0, rb.size());
    model += b;
    stripe.Append(ra, 0, 0);  // nothing
    a_owned.reset();
  }  // the replies and their handles are gone; `stripe` keeps their memory alive
  ASSERT_EQ(stripe.size(), model.size());
  EXPECT_TRUE(stripe.ToString() == model);
  std::mt19937 rng(13);
  for (int round = 0; round < 300; ++round) {
    const uint64_t offset = rng() % model.size();
    const uint64_t length = rng() % (model.size() - offset + 1);
    Pieces pieces;
    stripe.Slice(offset, length, &pieces);
    std::string sliced;
    for (const auto& piece : pieces) {
      ASSERT_GT(piece.size(), 0u);
      sliced.append(reinterpret_cast<const char*>(piece.data()), piece.size());
    }
    ASSERT_TRUE(sliced == model.substr(offset, length)) << offset << "+" << length;
    std::string copied(length, 'x');
    stripe.CopyTo(offset, std::as_writable_bytes(std::span<char>(copied.data(), length)));
    ASSERT_TRUE(copied == sliced) << offset << "+" << length;
  }
}

}  // namespace
}  // namespace aquifer::client
