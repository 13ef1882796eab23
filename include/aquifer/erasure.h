// Erasure coding and checksums for stripes: a Reed-Solomon codec over GF(2^8) with a Cauchy
// generator matrix, and CRC32C. Both wrap Intel ISA-L.
//
// Vocabulary (docs/design.md): a stripe has k data units (positions 0..k-1) followed by m parity
// units (positions k..k+m-1), all the same length in bytes. The code is systematic: data units
// are stored as they are; any k of the k + m units determine the other m.
//
// Pure CPU work: no I/O, no threads started, no logging. Buffers always belong to the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "aquifer/status.h"

namespace aquifer {

// A Reed-Solomon RS(k, m) codec. Build one per (k, m) with Create() and share it: every method is
// const and safe to call concurrently from many threads.
//
// Method: systematic Reed-Solomon over GF(2^8) (polynomial 0x11d) whose generator matrix is the
// k x k identity stacked on an m x k Cauchy matrix, C[i][j] = 1 / ((k + i) xor j)
// (ISA-L gf_gen_cauchy1_matrix). Every k x k submatrix of it is invertible, so any k units of a
// stripe rebuild the rest. Encoding uses ISA-L ec_init_tables / ec_encode_data (SIMD, chosen at
// run time for the CPU).
class ErasureCodec {
 public:
  // Smallest and largest accepted k (data units per stripe) and m (parity units per stripe).
  static constexpr int kMinDataUnits = 1;
  static constexpr int kMaxDataUnits = 16;
  static constexpr int kMinParityUnits = 1;
  static constexpr int kMaxParityUnits = 4;
  // The default layout: 4 data + 2 parity units.
  static constexpr int kDefaultDataUnits = 4;
  static constexpr int kDefaultParityUnits = 2;

  // Builds the codec for k data units and m parity units per stripe: computes the generator
  // matrix and the ISA-L encode tables (32 * k * m bytes) once.
  // Errors: kInvalidArgument unless 1 <= k <= 16 and 1 <= m <= 4.
  static Result<std::unique_ptr<ErasureCodec>> Create(int k = kDefaultDataUnits,
                                                      int m = kDefaultParityUnits);

  ~ErasureCodec();
  ErasureCodec(const ErasureCodec&) = delete;
  ErasureCodec& operator=(const ErasureCodec&) = delete;

  // Computes the m parity units of one stripe from its k data units.
  //
  // `data` has exactly k entries, `parity` exactly m, all of one length unit_bytes with
  // 1 <= unit_bytes <= INT32_MAX, none null. Parity buffers must not overlap each other or the
  // data.
  // On success every parity unit is overwritten; data is only read. On error nothing is written.
  // Errors: kInvalidArgument for wrong counts, unequal or zero lengths, or null buffers.
  // No allocation; safe to call concurrently.
  Status Encode(std::span<const std::span<const std::byte>> data,
                std::span<const std::span<std::byte>> parity) const;

  // Rebuilds the missing units of one stripe, data or parity, from the units present.
  //
  // `units` has k + m entries, data units 0..k-1 then parity units k..k+m-1, each unit_bytes
  // long (1..INT32_MAX), none null. `present` has k + m entries; present[i] says whether
  // units[i] holds valid bytes. Buffers must not overlap.
  // On success every unit with present[i] == false is filled in; present units are only read.
  // When nothing is missing this returns OK and does nothing. On error nothing is written.
  // Errors: kInvalidArgument for wrong counts, unequal or zero lengths, or null buffers;
  // kUnavailable when more than m units are missing (fewer than k present: the stripe cannot be
  // rebuilt from these units; fetch more of them).
  // Method: inverts the k x k rows of the generator matrix for the first k present units
  // (ISA-L gf_invert_matrix), then runs ec_encode_data with tables built from it. The tables are
  // cached per erasure pattern (set of present units), so only the first call per pattern
  // allocates (at most 32 * k * m bytes per pattern; at most a few thousand patterns for k + m
  // <= 20). Safe to call concurrently: the cache is guarded by a reader-writer lock.
  Status Reconstruct(std::span<const std::span<std::byte>> units,
                     std::span<const bool> present) const;

  // Brings the parity of one stripe up to date after data unit `data_index` changed from
  // `old_data` to `new_data` (a partial-stripe overwrite), without reading the other data units.
  //
  // 0 <= data_index < k. `old_data`, `new_data` and the m entries of `parity` all have one
  // length unit_bytes (1..INT32_MAX), none null; `parity` holds the stripe's current parity and
  // is updated in place to equal, byte for byte, what Encode() would compute over the new data.
  // A shorter overwrite inside a unit is expressed by passing the same sub-range of old data,
  // new data and every parity unit. Buffers must not overlap (old_data and new_data may be equal).
  // Errors: kInvalidArgument for a bad index, wrong count, unequal or zero lengths, null buffers;
  // on error nothing is written.
  // Method: parity_j ^= C[j][i] * (old xor new) in GF(2^8), done as two ISA-L
  // ec_encode_data_update passes (one over old_data, one over new_data), so no scratch buffer.
  // No allocation; safe to call concurrently (on different parity buffers).
  Status UpdateParity(int data_index, std::span<const std::byte> old_data,
                      std::span<const std::byte> new_data,
                      std::span<const std::span<std::byte>> parity) const;

  // Data units per stripe (k) and parity units per stripe (m).
  int k() const { return k_; }
  int m() const { return m_; }

 private:
  struct DecodeCache;

  ErasureCodec(int k, int m);

  int k_;
  int m_;
  // (k + m) x k generator matrix, row-major: identity rows then Cauchy rows.
  std::unique_ptr<unsigned char[]> matrix_;
  // ISA-L tables for the m Cauchy rows: 32 * k * m bytes.
  std::unique_ptr<unsigned char[]> encode_tables_;
  std::unique_ptr<DecodeCache> decode_cache_;
};

// CRC32C (Castagnoli polynomial 0x1EDC6F41, reflected, init and final xor 0xFFFFFFFF: the
// iSCSI / ext4 / RocksDB checksum) of `bytes`, continuing from `crc`.
//
// `crc` is a previous result of Crc32c (0 to start), so checksums extend:
// Crc32c(a + b) == Crc32c(b, Crc32c(a)), and Crc32c("123456789") == 0xE3069283. The empty buffer
// leaves `crc` unchanged. Any length (split internally into ISA-L's int-sized calls). `bytes` may
// be empty with a null data pointer. Cannot fail. Method: ISA-L crc32_iscsi (SSE4.2 crc32 or
// carry-less multiply when the CPU has them). Safe to call concurrently.
uint32_t Crc32c(std::span<const std::byte> bytes, uint32_t crc = 0);

}  // namespace aquifer
