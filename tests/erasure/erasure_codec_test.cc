#include "aquifer/erasure.h"

#include <isa-l/erasure_code.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "aquifer/units.h"

namespace aquifer {
namespace {

using Bytes = std::vector<std::byte>;

// One seed per test binary run: AQUIFER_TEST_SEED if set, else random; always printed.
uint64_t TestSeed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("AQUIFER_TEST_SEED");
    const uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::cerr << "erasure_test seed=" << s << " (rerun with AQUIFER_TEST_SEED=" << s << ")\n";
    return s;
  }();
  return seed;
}

void FillRandom(Bytes& b, std::mt19937_64& rng) {
  size_t i = 0;
  for (; i + 8 <= b.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(b.data() + i, &v, 8);
  }
  for (; i < b.size(); ++i) b[i] = static_cast<std::byte>(rng());
}

// A stripe of k data units then m parity units, each `unit_bytes` long.
struct Stripe {
  std::vector<Bytes> units;

  Stripe(int k, int m, size_t unit_bytes) : units(k + m, Bytes(unit_bytes)) {}

  std::vector<std::span<const std::byte>> Data(int k) const {
    return {units.begin(), units.begin() + k};
  }
  std::vector<std::span<std::byte>> Parity(int k) {
    return {units.begin() + k, units.end()};
  }
  std::vector<std::span<std::byte>> All() { return {units.begin(), units.end()}; }
};

Stripe RandomEncodedStripe(const ErasureCodec& codec, size_t unit_bytes, std::mt19937_64& rng) {
  Stripe s(codec.k(), codec.m(), unit_bytes);
  for (int i = 0; i < codec.k(); ++i) FillRandom(s.units[i], rng);
  const auto data = s.Data(codec.k());
  const auto parity = s.Parity(codec.k());
  EXPECT_TRUE(codec.Encode(data, parity).ok());
  return s;
}

std::unique_ptr<ErasureCodec> MakeCodec(int k, int m) {
  auto codec = ErasureCodec::Create(k, m);
  EXPECT_TRUE(codec.ok()) << codec.status().ToString();
  return std::move(codec).value();
}

// Every subset of {0..n-1} with 1..max_size members, as sorted index lists.
std::vector<std::vector<int>> AllPatterns(int n, int max_size) {
  std::vector<std::vector<int>> out;
  for (uint32_t mask = 1; mask < (uint32_t{1} << n); ++mask) {
    if (std::popcount(mask) > max_size) continue;
    std::vector<int> p;
    for (int i = 0; i < n; ++i) {
      if (mask & (uint32_t{1} << i)) p.push_back(i);
    }
    out.push_back(std::move(p));
  }
  return out;
}

// Loses the units in `lost` (overwrites them with garbage), rebuilds them, and expects the whole
// stripe to equal `want` again.
void ExpectRebuilds(const ErasureCodec& codec, Stripe& work, const Stripe& want,
                    const std::vector<int>& lost) {
  const int n = codec.k() + codec.m();
  std::unique_ptr<bool[]> present(new bool[n]);
  std::fill(present.get(), present.get() + n, true);
  for (int u : lost) {
    present[u] = false;
    std::fill(work.units[u].begin(), work.units[u].end(), std::byte{0xA5});
  }
  const auto units = work.All();
  const Status s = codec.Reconstruct(units, std::span<const bool>(present.get(), n));
  std::string lost_str;
  for (int u : lost) lost_str += std::to_string(u) + " ";
  ASSERT_TRUE(s.ok()) << "lost {" << lost_str << "}: " << s.ToString();
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(work.units[i] == want.units[i])
        << "unit " << i << " differs after rebuilding lost {" << lost_str << "}";
  }
}

struct RoundTripCase {
  int k;
  int m;
  size_t unit_bytes;
  size_t max_patterns;  // 0: every pattern of up to m lost units
};

void PrintTo(const RoundTripCase& c, std::ostream* os) {
  *os << "k=" << c.k << " m=" << c.m << " unit_bytes=" << c.unit_bytes;
}

std::string CaseName(const testing::TestParamInfo<RoundTripCase>& info) {
  return "K" + std::to_string(info.param.k) + "M" + std::to_string(info.param.m) + "Len" +
         std::to_string(info.param.unit_bytes);
}

class CodecRoundTripTest : public testing::TestWithParam<RoundTripCase> {};

TEST_P(CodecRoundTripTest, RebuildsEveryPatternOfUpToMLostUnits) {
  const RoundTripCase c = GetParam();
  std::mt19937_64 rng(TestSeed() ^ (c.k * 1000003u + c.m * 7919u + c.unit_bytes));
  auto codec = MakeCodec(c.k, c.m);
  const Stripe want = RandomEncodedStripe(*codec, c.unit_bytes, rng);
  Stripe work = want;

  std::vector<std::vector<int>> patterns = AllPatterns(c.k + c.m, c.m);
  if (c.max_patterns != 0 && patterns.size() > c.max_patterns) {
    // A random sample of the patterns (the seed is logged).
    std::shuffle(patterns.begin(), patterns.end(), rng);
    patterns.resize(c.max_patterns);
  }
  for (const auto& lost : patterns) {
    ExpectRebuilds(*codec, work, want, lost);
    if (HasFatalFailure()) return;
  }
}

constexpr size_t kBig = 1 * kMiB + 7;

INSTANTIATE_TEST_SUITE_P(
    AllLayouts, CodecRoundTripTest,
    testing::Values(
        // Every pattern at every length for the small codes.
        RoundTripCase{4, 2, 1, 0}, RoundTripCase{4, 2, 31, 0}, RoundTripCase{4, 2, 4096, 0},
        RoundTripCase{4, 2, kBig, 0}, RoundTripCase{8, 2, 1, 0}, RoundTripCase{8, 2, 31, 0},
        RoundTripCase{8, 2, 4096, 0}, RoundTripCase{8, 2, kBig, 0}, RoundTripCase{6, 3, 1, 0},
        RoundTripCase{6, 3, 31, 0}, RoundTripCase{6, 3, 4096, 0}, RoundTripCase{6, 3, kBig, 0},
        RoundTripCase{1, 2, 1, 0}, RoundTripCase{1, 2, 31, 0}, RoundTripCase{1, 2, 4096, 0},
        RoundTripCase{1, 2, kBig, 0},
        // 16+4 has 6195 patterns: a random sample, smaller at 1 MiB.
        RoundTripCase{16, 4, 1, 1000}, RoundTripCase{16, 4, 31, 1000},
        RoundTripCase{16, 4, 4096, 300}, RoundTripCase{16, 4, kBig, 12}),
    CaseName);

// GF(2^8) reference: parity j = sum_i C[j][i] * data_i with C[j][i] = 1 / ((k + j) xor i).
// Pins the on-disk format: a change of generator matrix would make old stripes undecodable.
TEST(CodecTest, ParityIsTheDocumentedCauchyCombination) {
  std::mt19937_64 rng(TestSeed());
  for (const auto& [k, m] : {std::pair{4, 2}, {8, 2}, {6, 3}, {1, 2}, {16, 4}, {3, 1}}) {
    auto codec = MakeCodec(k, m);
    const Stripe s = RandomEncodedStripe(*codec, 100, rng);
    for (int j = 0; j < m; ++j) {
      for (size_t b = 0; b < 100; ++b) {
        unsigned char want = 0;
        for (int i = 0; i < k; ++i) {
          want ^= gf_mul(gf_inv(static_cast<unsigned char>((k + j) ^ i)),
                         static_cast<unsigned char>(s.units[i][b]));
        }
        ASSERT_EQ(static_cast<unsigned char>(s.units[k + j][b]), want)
            << "k=" << k << " m=" << m << " parity " << j << " byte " << b;
      }
    }
  }
}

TEST(CodecTest, DefaultIsFourPlusTwo) {
  auto codec = ErasureCodec::Create();
  ASSERT_TRUE(codec.ok());
  EXPECT_EQ((*codec)->k(), 4);
  EXPECT_EQ((*codec)->m(), 2);
}

TEST(CodecTest, ReconstructWithNothingMissingChangesNothing) {
  std::mt19937_64 rng(TestSeed());
  auto codec = MakeCodec(4, 2);
  const Stripe want = RandomEncodedStripe(*codec, 64, rng);
  Stripe work = want;
  const bool present[6] = {true, true, true, true, true, true};
  const auto units = work.All();
  ASSERT_TRUE(codec->Reconstruct(units, present).ok());
  EXPECT_TRUE(work.units == want.units);
}

TEST(CodecTest, ConcurrentRebuildsShareTheDecodeCache) {
  auto codec = MakeCodec(8, 2);
  const uint64_t seed = TestSeed();
  const auto patterns = AllPatterns(10, 2);
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      const Stripe want = RandomEncodedStripe(*codec, 512, rng);
      Stripe work = want;
      for (int round = 0; round < 3; ++round) {
        for (const auto& lost : patterns) {
          bool present[10];
          std::fill(present, present + 10, true);
          for (int u : lost) {
            present[u] = false;
            std::fill(work.units[u].begin(), work.units[u].end(), std::byte{0});
          }
          const auto units = work.All();
          if (!codec->Reconstruct(units, present).ok() || work.units != want.units) {
            ++failures[t];
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

// --- parity delta update ------------------------------------------------------------------

class DeltaUpdateTest : public testing::TestWithParam<size_t> {};

TEST_P(DeltaUpdateTest, EqualsAFullReencodeForEveryDataUnit) {
  const size_t len = GetParam();
  std::mt19937_64 rng(TestSeed() ^ len);
  for (const auto& [k, m] : {std::pair{4, 2}, {8, 2}, {6, 3}, {1, 2}, {16, 4}}) {
    auto codec = MakeCodec(k, m);
    Stripe s = RandomEncodedStripe(*codec, len, rng);
    std::vector<Bytes> reencoded(m, Bytes(len));
    const std::vector<std::span<std::byte>> reencoded_spans(reencoded.begin(), reencoded.end());
    Bytes new_data(len);
    // Every data unit at small lengths; first, middle and last at 1 MiB (test time).
    std::vector<int> indices(k);
    std::iota(indices.begin(), indices.end(), 0);
    if (len > 4096 && k > 3) indices = {0, k / 2, k - 1};
    for (int i : indices) {
      FillRandom(new_data, rng);
      const auto parity = s.Parity(k);
      ASSERT_TRUE(codec->UpdateParity(i, s.units[i], new_data, parity).ok());
      std::swap(s.units[i], new_data);
      const auto data = s.Data(k);
      ASSERT_TRUE(codec->Encode(data, reencoded_spans).ok());
      for (int j = 0; j < m; ++j) {
        ASSERT_TRUE(s.units[k + j] == reencoded[j])
            << "k=" << k << " m=" << m << " updated unit " << i << " parity " << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Lengths, DeltaUpdateTest, testing::Values(1, 31, 4096, kBig),
                         [](const auto& info) { return "Len" + std::to_string(info.param); });

TEST(DeltaUpdateTest, SubRangeOverwriteEqualsAFullReencode) {
  std::mt19937_64 rng(TestSeed());
  auto codec = MakeCodec(4, 2);
  Stripe s = RandomEncodedStripe(*codec, 8192, rng);
  const size_t off = 1000, len = 333;
  Bytes new_bytes(len);
  FillRandom(new_bytes, rng);
  std::vector<std::span<std::byte>> parity_slices;
  for (int j = 4; j < 6; ++j) parity_slices.emplace_back(s.units[j].data() + off, len);
  ASSERT_TRUE(codec
                  ->UpdateParity(2, std::span<const std::byte>(s.units[2].data() + off, len),
                                 new_bytes, parity_slices)
                  .ok());
  std::copy(new_bytes.begin(), new_bytes.end(), s.units[2].begin() + off);
  Stripe reencoded = s;
  const auto data = reencoded.Data(4);
  const auto re_parity = reencoded.Parity(4);
  ASSERT_TRUE(codec->Encode(data, re_parity).ok());
  EXPECT_TRUE(s.units == reencoded.units);
}

// --- CRC32C -----------------------------------------------------------------------------

std::span<const std::byte> AsBytes(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

// Bitwise reference CRC32C (reflected polynomial 0x82F63B78).
uint32_t ReferenceCrc32c(std::span<const std::byte> b) {
  uint32_t crc = 0xFFFFFFFF;
  for (std::byte x : b) {
    crc ^= static_cast<uint8_t>(x);
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ (0x82F63B78 & (0u - (crc & 1)));
  }
  return ~crc;
}

TEST(Crc32cTest, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c(AsBytes("123456789")), 0xE3069283u);
}

TEST(Crc32cTest, MatchesRfc3720Vectors) {
  const Bytes zeros(32, std::byte{0});
  const Bytes ones(32, std::byte{0xFF});
  Bytes ascending(32);
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<std::byte>(i);
  EXPECT_EQ(Crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32cTest, EmptyBufferLeavesTheValueUnchanged) {
  EXPECT_EQ(Crc32c({}), 0u);
  EXPECT_EQ(Crc32c({}, 0xE3069283u), 0xE3069283u);
}

TEST(Crc32cTest, IncrementalEqualsOneShotAtEverySplit) {
  std::mt19937_64 rng(TestSeed());
  Bytes buf(1500);
  FillRandom(buf, rng);
  const std::span<const std::byte> all(buf);
  const uint32_t whole = Crc32c(all);
  EXPECT_EQ(whole, ReferenceCrc32c(all));
  for (size_t split = 0; split <= buf.size(); ++split) {
    ASSERT_EQ(Crc32c(all.subspan(split), Crc32c(all.first(split))), whole) << "split " << split;
  }
  // Three pieces, byte by byte through a random walk.
  uint32_t running = 0;
  size_t pos = 0;
  while (pos < buf.size()) {
    const size_t n = std::min<size_t>(buf.size() - pos, rng() % 97);
    running = Crc32c(all.subspan(pos, n), running);
    pos += n;
  }
  EXPECT_EQ(running, whole);
}

TEST(Crc32cTest, MatchesReferenceOnRandomLengths) {
  std::mt19937_64 rng(TestSeed());
  for (size_t len : {1, 2, 7, 8, 15, 16, 63, 64, 255, 256, 4095, 4096, 65537}) {
    Bytes buf(len);
    FillRandom(buf, rng);
    ASSERT_EQ(Crc32c(buf), ReferenceCrc32c(buf)) << "len " << len;
  }
}

// --- bad arguments ----------------------------------------------------------------------

TEST(CodecArgsTest, CreateRejectsKOrMOutOfRange) {
  for (const auto& [k, m] : {std::pair{0, 2}, {-1, 2}, {17, 2}, {4, 0}, {4, 5}, {4, -1}}) {
    auto codec = ErasureCodec::Create(k, m);
    ASSERT_FALSE(codec.ok()) << "k=" << k << " m=" << m;
    EXPECT_EQ(codec.status().code(), Code::kInvalidArgument);
  }
  for (const auto& [k, m] : {std::pair{1, 1}, {16, 4}, {16, 1}, {1, 4}}) {
    EXPECT_TRUE(ErasureCodec::Create(k, m).ok()) << "k=" << k << " m=" << m;
  }
}

class CodecArgsFixture : public testing::Test {
 protected:
  void SetUp() override {
    codec_ = MakeCodec(4, 2);
    std::mt19937_64 rng(TestSeed());
    good_ = std::make_unique<Stripe>(RandomEncodedStripe(*codec_, 64, rng));
  }
  // Expects `s` to be kInvalidArgument and the stripe untouched.
  void ExpectInvalidAndUntouched(const Status& s, const Stripe& work) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_TRUE(work.units == good_->units) << "buffers were written on error";
  }
  std::unique_ptr<ErasureCodec> codec_;
  std::unique_ptr<Stripe> good_;
};

TEST_F(CodecArgsFixture, EncodeRejectsWrongCounts) {
  Stripe w = *good_;
  auto data = w.Data(4);
  auto parity = w.Parity(4);
  ExpectInvalidAndUntouched(codec_->Encode(std::span(data).first(3), parity), w);
  ExpectInvalidAndUntouched(codec_->Encode(data, std::span(parity).first(1)), w);
  std::vector<std::span<std::byte>> three_parity = {parity[0], parity[1], parity[1]};
  ExpectInvalidAndUntouched(codec_->Encode(data, three_parity), w);
}

TEST_F(CodecArgsFixture, EncodeRejectsUnequalEmptyOrNullUnits) {
  Stripe w = *good_;
  auto data = w.Data(4);
  auto parity = w.Parity(4);
  auto short_data = data;
  short_data[2] = short_data[2].first(63);
  ExpectInvalidAndUntouched(codec_->Encode(short_data, parity), w);
  auto short_parity = parity;
  short_parity[1] = short_parity[1].first(63);
  ExpectInvalidAndUntouched(codec_->Encode(data, short_parity), w);
  std::vector<Bytes> shorter(4, Bytes(32));
  std::vector<std::span<const std::byte>> all_short(shorter.begin(), shorter.end());
  ExpectInvalidAndUntouched(codec_->Encode(all_short, parity), w);
  auto empty = data;
  for (auto& d : empty) d = d.first(0);
  auto empty_parity = parity;
  for (auto& p : empty_parity) p = p.first(0);
  ExpectInvalidAndUntouched(codec_->Encode(empty, empty_parity), w);
  auto null_data = data;
  null_data[0] = std::span<const std::byte>(static_cast<const std::byte*>(nullptr), 64);
  ExpectInvalidAndUntouched(codec_->Encode(null_data, parity), w);
  auto null_parity = parity;
  null_parity[0] = std::span<std::byte>(static_cast<std::byte*>(nullptr), 64);
  ExpectInvalidAndUntouched(codec_->Encode(data, null_parity), w);
}

TEST_F(CodecArgsFixture, ReconstructRejectsWrongCountsLengthsAndNulls) {
  Stripe w = *good_;
  auto units = w.All();
  bool present[6] = {false, true, true, true, true, true};
  ExpectInvalidAndUntouched(codec_->Reconstruct(std::span(units).first(5), present), w);
  ExpectInvalidAndUntouched(codec_->Reconstruct(units, std::span(present).first(5)), w);
  auto unequal = units;
  unequal[3] = unequal[3].first(10);
  ExpectInvalidAndUntouched(codec_->Reconstruct(unequal, present), w);
  auto nulls = units;
  nulls[0] = std::span<std::byte>(static_cast<std::byte*>(nullptr), 64);
  ExpectInvalidAndUntouched(codec_->Reconstruct(nulls, present), w);
  auto empty = units;
  for (auto& u : empty) u = u.first(0);
  ExpectInvalidAndUntouched(codec_->Reconstruct(empty, present), w);
}

TEST_F(CodecArgsFixture, ReconstructReportsUnavailableWhenMoreThanMAreMissing) {
  Stripe w = *good_;
  const auto units = w.All();
  const bool three_missing[6] = {false, true, false, true, true, false};
  const Status s = codec_->Reconstruct(units, three_missing);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_TRUE(w.units == good_->units);
  const bool none_present[6] = {};
  EXPECT_EQ(codec_->Reconstruct(units, none_present).code(), Code::kUnavailable);
}

TEST_F(CodecArgsFixture, UpdateParityRejectsBadIndexCountsLengthsAndNulls) {
  Stripe w = *good_;
  auto parity = w.Parity(4);
  const Bytes new_data(64, std::byte{7});
  const std::span<const std::byte> old_data = good_->units[1];
  for (int bad : {-1, 4, 100}) {
    ExpectInvalidAndUntouched(codec_->UpdateParity(bad, old_data, new_data, parity), w);
  }
  ExpectInvalidAndUntouched(codec_->UpdateParity(1, old_data, new_data, std::span(parity).first(1)),
                            w);
  ExpectInvalidAndUntouched(codec_->UpdateParity(1, old_data.first(63), new_data, parity), w);
  ExpectInvalidAndUntouched(
      codec_->UpdateParity(1, old_data, std::span(new_data).first(63), parity), w);
  auto short_parity = parity;
  short_parity[0] = short_parity[0].first(63);
  ExpectInvalidAndUntouched(codec_->UpdateParity(1, old_data, new_data, short_parity), w);
  ExpectInvalidAndUntouched(
      codec_->UpdateParity(
          1, std::span<const std::byte>(static_cast<const std::byte*>(nullptr), 64), new_data,
          parity),
      w);
  auto empty_parity = parity;
  for (auto& p : empty_parity) p = p.first(0);
  ExpectInvalidAndUntouched(
      codec_->UpdateParity(1, old_data.first(0), std::span(new_data).first(0), empty_parity), w);
}

}  // namespace
}  // namespace aquifer
