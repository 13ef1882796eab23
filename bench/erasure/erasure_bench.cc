// Throughput of aquifer::ErasureCodec against the raw ISA-L calls it wraps, in the same run.
//
// Each pair of benchmarks (Wrapper / RawIsal) runs the same k, m, unit size and buffers:
//   Encode:  k data units -> m parity units (ErasureCodec::Encode vs ec_encode_data with
//            precomputed tables).
//   Decode:  data units 0 and 1 lost, rebuilt from the next k units (ErasureCodec::Reconstruct,
//            decode tables cached after the first call, vs ec_encode_data with a precomputed
//            decode matrix).
// bytes/s counts k * unit_bytes of input per iteration for both. Args: {k, m, unit_bytes}.
#include <isa-l/crc.h>
#include <isa-l/erasure_code.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "aquifer/erasure.h"

namespace aquifer {
namespace {

struct Fixture {
  int k;
  int m;
  size_t unit_bytes;
  std::vector<std::vector<std::byte>> units;  // k data then m parity
  std::unique_ptr<ErasureCodec> codec;

  Fixture(int k_in, int m_in, size_t unit_bytes_in)
      : k(k_in), m(m_in), unit_bytes(unit_bytes_in), units(k_in + m_in) {
    std::mt19937_64 rng(42);
    for (auto& u : units) {
      u.resize(unit_bytes);
      for (auto& b : u) b = static_cast<std::byte>(rng());
    }
    codec = std::move(ErasureCodec::Create(k, m)).value();
    std::vector<std::span<const std::byte>> data(units.begin(), units.begin() + k);
    std::vector<std::span<std::byte>> parity(units.begin() + k, units.end());
    if (!codec->Encode(data, parity).ok()) std::abort();
  }
  unsigned char* Ptr(int i) { return reinterpret_cast<unsigned char*>(units[i].data()); }
};

void SetUp(benchmark::State& state, Fixture& f) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * f.k *
                          static_cast<int64_t>(f.unit_bytes));
  state.counters["k"] = f.k;
  state.counters["m"] = f.m;
}

void BM_Encode_Wrapper(benchmark::State& state) {
  Fixture f(state.range(0), state.range(1), state.range(2));
  std::vector<std::span<const std::byte>> data(f.units.begin(), f.units.begin() + f.k);
  std::vector<std::span<std::byte>> parity(f.units.begin() + f.k, f.units.end());
  for (auto _ : state) {
    Status s = f.codec->Encode(data, parity);
    benchmark::DoNotOptimize(s);
  }
  SetUp(state, f);
}

void BM_Encode_RawIsal(benchmark::State& state) {
  Fixture f(state.range(0), state.range(1), state.range(2));
  std::vector<unsigned char> matrix((f.k + f.m) * f.k);
  std::vector<unsigned char> tables(32 * f.k * f.m);
  gf_gen_cauchy1_matrix(matrix.data(), f.k + f.m, f.k);
  ec_init_tables(f.k, f.m, matrix.data() + f.k * f.k, tables.data());
  std::vector<unsigned char*> in(f.k), out(f.m);
  for (int i = 0; i < f.k; ++i) in[i] = f.Ptr(i);
  for (int j = 0; j < f.m; ++j) out[j] = f.Ptr(f.k + j);
  for (auto _ : state) {
    ec_encode_data(static_cast<int>(f.unit_bytes), f.k, f.m, tables.data(), in.data(), out.data());
    benchmark::ClobberMemory();
  }
  SetUp(state, f);
}

void BM_Decode2_Wrapper(benchmark::State& state) {
  Fixture f(state.range(0), state.range(1), state.range(2));
  std::vector<std::span<std::byte>> units(f.units.begin(), f.units.end());
  std::unique_ptr<bool[]> present(new bool[f.k + f.m]);
  for (int i = 0; i < f.k + f.m; ++i) present[i] = i >= 2;
  const std::span<const bool> present_span(present.get(), f.k + f.m);
  for (auto _ : state) {
    Status s = f.codec->Reconstruct(units, present_span);
    benchmark::DoNotOptimize(s);
  }
  SetUp(state, f);
}

void BM_Decode2_RawIsal(benchmark::State& state) {
  Fixture f(state.range(0), state.range(1), state.range(2));
  const int k = f.k;
  std::vector<unsigned char> matrix((k + f.m) * k);
  gf_gen_cauchy1_matrix(matrix.data(), k + f.m, k);
  // Survivors are units 2..k+1; invert their generator rows, keep rows 0 and 1 (lost data).
  std::vector<unsigned char> b(k * k), b_inv(k * k), tables(32 * k * 2);
  std::memcpy(b.data(), matrix.data() + 2 * k, k * k);
  if (gf_invert_matrix(b.data(), b_inv.data(), k) != 0) std::abort();
  ec_init_tables(k, 2, b_inv.data(), tables.data());
  std::vector<unsigned char*> in(k), out(2);
  for (int i = 0; i < k; ++i) in[i] = f.Ptr(2 + i);
  out[0] = f.Ptr(0);
  out[1] = f.Ptr(1);
  for (auto _ : state) {
    ec_encode_data(static_cast<int>(f.unit_bytes), k, 2, tables.data(), in.data(), out.data());
    benchmark::ClobberMemory();
  }
  SetUp(state, f);
}

void BM_UpdateParity_Wrapper(benchmark::State& state) {
  Fixture f(state.range(0), state.range(1), state.range(2));
  std::vector<std::byte> new_data(f.units[0]);
  std::vector<std::span<std::byte>> parity(f.units.begin() + f.k, f.units.end());
  for (auto _ : state) {
    Status s = f.codec->UpdateParity(0, f.units[0], new_data, parity);
    benchmark::DoNotOptimize(s);
  }
  // One data unit of change per iteration.
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(f.unit_bytes));
}

void BM_Crc32c(benchmark::State& state) {
  std::vector<std::byte> buf(state.range(0), std::byte{0x5a});
  for (auto _ : state) benchmark::DoNotOptimize(Crc32c(buf));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

}  // namespace
}  // namespace aquifer

int main(int argc, char** argv) {
  using namespace aquifer;
  // Wrapper and raw ISA-L registered adjacently per shape, so each pair runs under the same
  // machine load.
  struct Variant {
    const char* name;
    void (*fn)(benchmark::State&);
  };
  const Variant variants[] = {{"BM_Encode_Wrapper", BM_Encode_Wrapper},
                              {"BM_Encode_RawIsal", BM_Encode_RawIsal},
                              {"BM_Decode2_Wrapper", BM_Decode2_Wrapper},
                              {"BM_Decode2_RawIsal", BM_Decode2_RawIsal}};
  for (int64_t k : {4, 8}) {
    for (int64_t unit : {int64_t{64} << 10, int64_t{1} << 20}) {
      for (const Variant& v : variants) {
        benchmark::RegisterBenchmark(v.name, v.fn)->Args({k, 2, unit});
      }
    }
  }
  for (int64_t k : {4, 8}) {
    benchmark::RegisterBenchmark("BM_UpdateParity_Wrapper", BM_UpdateParity_Wrapper)
        ->Args({k, 2, int64_t{64} << 10});
  }
  benchmark::RegisterBenchmark("BM_Crc32c", BM_Crc32c)->Arg(64 << 10)->Arg(1 << 20);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
