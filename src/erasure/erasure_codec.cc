// RS(k, m) over GF(2^8) with a Cauchy generator matrix, on ISA-L. See include/aquifer/erasure.h.
#include <isa-l/erasure_code.h>

#include <array>
#include <climits>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "aquifer/erasure.h"

namespace aquifer {
namespace {

constexpr int kMaxUnits = ErasureCodec::kMaxDataUnits + ErasureCodec::kMaxParityUnits;
// ISA-L expands each matrix coefficient into a 32-byte multiplication table.
constexpr int kTableBytesPerCoefficient = 32;

// Checks that `n` spans of one length, none null, none empty, none over INT_MAX bytes; stores
// that length in `*unit_bytes`. `what` names the argument in the error.
template <class Span>
Status CheckUnits(std::span<const Span> units, const char* what, size_t* unit_bytes) {
  for (size_t i = 0; i < units.size(); ++i) {
    const Span& u = units[i];
    if (u.data() == nullptr) {
      return InvalidArgument(std::string(what) + " unit " + std::to_string(i) + " is null");
    }
    if (u.empty()) {
      return InvalidArgument(std::string(what) + " unit " + std::to_string(i) + " is empty");
    }
    if (i == 0) {
      *unit_bytes = u.size();
    } else if (u.size() != *unit_bytes) {
      return InvalidArgument(std::string(what) + " unit " + std::to_string(i) + " has " +
                             std::to_string(u.size()) + " bytes, unit 0 has " +
                             std::to_string(*unit_bytes));
    }
  }
  if (*unit_bytes > static_cast<size_t>(INT_MAX)) {
    return InvalidArgument(std::string(what) + " units are longer than INT32_MAX bytes");
  }
  return OkStatus();
}

unsigned char* Bytes(std::span<std::byte> s) { return reinterpret_cast<unsigned char*>(s.data()); }
// ISA-L takes non-const pointers for its inputs but only reads them.
unsigned char* Bytes(std::span<const std::byte> s) {
  return const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(s.data()));
}

}  // namespace

// Decode tables per erasure pattern. The key is the bit mask of present units (bit i = unit i).
// Entries are never erased, and unordered_map never moves its elements, so a table pointer read
// under the shared lock stays valid after the lock is released.
struct ErasureCodec::DecodeCache {
  std::shared_mutex mu;  // guards `tables`
  std::unordered_map<uint32_t, std::unique_ptr<unsigned char[]>> tables;
};

ErasureCodec::ErasureCodec(int k, int m)
    : k_(k),
      m_(m),
      matrix_(new unsigned char[(k + m) * k]),
      encode_tables_(new unsigned char[kTableBytesPerCoefficient * k * m]),
      decode_cache_(std::make_unique<DecodeCache>()) {
  gf_gen_cauchy1_matrix(matrix_.get(), k + m, k);
  ec_init_tables(k, m, matrix_.get() + k * k, encode_tables_.get());
}

ErasureCodec::~ErasureCodec() = default;

Result<std::unique_ptr<ErasureCodec>> ErasureCodec::Create(int k, int m) {
  if (k < kMinDataUnits || k > kMaxDataUnits) {
    return InvalidArgument("erasure codec: k=" + std::to_string(k) + " is outside [" +
                           std::to_string(kMinDataUnits) + ", " + std::to_string(kMaxDataUnits) +
                           "]");
  }
  if (m < kMinParityUnits || m > kMaxParityUnits) {
    return InvalidArgument("erasure codec: m=" + std::to_string(m) + " is outside [" +
                           std::to_string(kMinParityUnits) + ", " +
                           std::to_string(kMaxParityUnits) + "]");
  }
  return std::unique_ptr<ErasureCodec>(new ErasureCodec(k, m));
}

Status ErasureCodec::Encode(std::span<const std::span<const std::byte>> data,
                            std::span<const std::span<std::byte>> parity) const {
  if (data.size() != static_cast<size_t>(k_) || parity.size() != static_cast<size_t>(m_)) {
    return InvalidArgument("encode: got " + std::to_string(data.size()) + " data and " +
                           std::to_string(parity.size()) + " parity units, want k=" +
                           std::to_string(k_) + " and m=" + std::to_string(m_));
  }
  size_t data_bytes = 0;
  size_t parity_bytes = 0;
  AQ_RETURN_IF_ERROR(CheckUnits(data, "encode: data", &data_bytes));
  AQ_RETURN_IF_ERROR(CheckUnits(parity, "encode: parity", &parity_bytes));
  if (data_bytes != parity_bytes) {
    return InvalidArgument("encode: data units have " + std::to_string(data_bytes) +
                           " bytes, parity units " + std::to_string(parity_bytes));
  }
  std::array<unsigned char*, kMaxDataUnits> in;
  std::array<unsigned char*, kMaxParityUnits> out;
  for (int i = 0; i < k_; ++i) in[i] = Bytes(data[i]);
  for (int j = 0; j < m_; ++j) out[j] = Bytes(parity[j]);
  ec_encode_data(static_cast<int>(data_bytes), k_, m_, encode_tables_.get(), in.data(),
                 out.data());
  return OkStatus();
}

Status ErasureCodec::Reconstruct(std::span<const std::span<std::byte>> units,
                                 std::span<const bool> present) const {
  const size_t n = static_cast<size_t>(k_ + m_);
  if (units.size() != n || present.size() != n) {
    return InvalidArgument("reconstruct: got " + std::to_string(units.size()) + " units and " +
                           std::to_string(present.size()) + " present flags, want k+m=" +
                           std::to_string(n));
  }
  size_t unit_bytes = 0;
  AQ_RETURN_IF_ERROR(CheckUnits(units, "reconstruct:", &unit_bytes));

  // Survivors: the first k present units. Missing: every absent unit.
  std::array<int, kMaxUnits> survivors;
  std::array<int, kMaxUnits> missing;
  int n_survivors = 0;
  int n_missing = 0;
  uint32_t present_mask = 0;
  for (int i = 0; i < static_cast<int>(n); ++i) {
    if (present[i]) {
      present_mask |= uint32_t{1} << i;
      if (n_survivors < k_) survivors[n_survivors++] = i;
    } else {
      missing[n_missing++] = i;
    }
  }
  if (n_missing == 0) return OkStatus();
  if (n_missing > m_) {
    return Unavailable("reconstruct: " + std::to_string(n_missing) + " of " + std::to_string(n) +
                       " units missing, at most m=" + std::to_string(m_) + " can be rebuilt");
  }

  const unsigned char* tables = nullptr;
  {
    std::shared_lock lock(decode_cache_->mu);
    auto it = decode_cache_->tables.find(present_mask);
    if (it != decode_cache_->tables.end()) tables = it->second.get();
  }
  if (tables == nullptr) {
    // Rows of the generator matrix for the survivors form an invertible k x k matrix B
    // (Cauchy property); B^-1 maps the survivors back to the data units.
    const int k = k_;
    std::array<unsigned char, kMaxDataUnits * kMaxDataUnits> b;
    std::array<unsigned char, kMaxDataUnits * kMaxDataUnits> b_inv;
    for (int r = 0; r < k; ++r) {
      std::memcpy(&b[r * k], &matrix_[survivors[r] * k], k);
    }
    if (gf_invert_matrix(b.data(), b_inv.data(), k) != 0) {
      return Internal("reconstruct: generator submatrix is singular (a codec bug)");
    }
    // Row for each missing unit, in terms of the survivors: a data unit d is row d of B^-1;
    // a parity unit p is (row p of the generator) x B^-1.
    std::array<unsigned char, kMaxParityUnits * kMaxDataUnits> rows;
    for (int e = 0; e < n_missing; ++e) {
      const int u = missing[e];
      if (u < k) {
        std::memcpy(&rows[e * k], &b_inv[u * k], k);
        continue;
      }
      for (int c = 0; c < k; ++c) {
        unsigned char s = 0;
        for (int j = 0; j < k; ++j) s ^= gf_mul(matrix_[u * k + j], b_inv[j * k + c]);
        rows[e * k + c] = s;
      }
    }
    auto fresh = std::make_unique<unsigned char[]>(kTableBytesPerCoefficient * k * n_missing);
    ec_init_tables(k, n_missing, rows.data(), fresh.get());
    std::unique_lock lock(decode_cache_->mu);
    // Another thread may have built the same tables meanwhile; either copy is correct.
    auto [it, inserted] = decode_cache_->tables.try_emplace(present_mask, std::move(fresh));
    tables = it->second.get();
  }

  std::array<unsigned char*, kMaxDataUnits> in;
  std::array<unsigned char*, kMaxParityUnits> out;
  for (int r = 0; r < k_; ++r) in[r] = Bytes(units[survivors[r]]);
  for (int e = 0; e < n_missing; ++e) out[e] = Bytes(units[missing[e]]);
  ec_encode_data(static_cast<int>(unit_bytes), k_, n_missing, const_cast<unsigned char*>(tables),
                 in.data(), out.data());
  return OkStatus();
}

Status ErasureCodec::UpdateParity(int data_index, std::span<const std::byte> old_data,
                                  std::span<const std::byte> new_data,
                                  std::span<const std::span<std::byte>> parity) const {
  if (data_index < 0 || data_index >= k_) {
    return InvalidArgument("update parity: data_index=" + std::to_string(data_index) +
                           " is outside [0, " + std::to_string(k_) + ")");
  }
  if (parity.size() != static_cast<size_t>(m_)) {
    return InvalidArgument("update parity: got " + std::to_string(parity.size()) +
                           " parity units, want m=" + std::to_string(m_));
  }
  size_t parity_bytes = 0;
  AQ_RETURN_IF_ERROR(CheckUnits(parity, "update parity: parity", &parity_bytes));
  const std::span<const std::byte> data_units[2] = {old_data, new_data};
  size_t data_bytes = 0;
  AQ_RETURN_IF_ERROR(
      CheckUnits(std::span<const std::span<const std::byte>>(data_units), "update parity: old/new",
                 &data_bytes));
  if (data_bytes != parity_bytes) {
    return InvalidArgument("update parity: data has " + std::to_string(data_bytes) +
                           " bytes, parity " + std::to_string(parity_bytes));
  }
  std::array<unsigned char*, kMaxParityUnits> out;
  for (int j = 0; j < m_; ++j) out[j] = Bytes(parity[j]);
  const int len = static_cast<int>(data_bytes);
  // GF(2^8) multiplication distributes over xor: C*old ^ C*new == C*(old ^ new). Each pass
  // xors C[j][data_index] * source into parity j.
  ec_encode_data_update(len, k_, m_, data_index, encode_tables_.get(), Bytes(old_data),
                        out.data());
  ec_encode_data_update(len, k_, m_, data_index, encode_tables_.get(), Bytes(new_data),
                        out.data());
  return OkStatus();
}

}  // namespace aquifer
