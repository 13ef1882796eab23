// Client library throughput against a local ProcessCluster (real daemons, no FUSE):
// sequential write and read of one large file, and small-file create+write and read rates.
// Prints a table and one JSON line. Usage: client_bench [--big-mib N] [--small-files N]
#include <fcntl.h>
#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aquifer/client.h"
#include "aquifer/units.h"
#include "testing/process_cluster.h"

using namespace aquifer;
using Clock = std::chrono::steady_clock;

namespace {
double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}
void Check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::cerr << what << ": " << s.ToString() << "\n";
    std::exit(1);
  }
}
}  // namespace

int main(int argc, char** argv) {
  // As aquifer-mount does: keep freed stripe buffers in the heap (no mmap/munmap per buffer).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc refuses more than 32 MiB
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  uint64_t big_mib = 256;
  int small_files = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--big-mib") == 0) big_mib = std::stoull(argv[i + 1]);
    if (std::strcmp(argv[i], "--small-files") == 0) small_files = std::stoi(argv[i + 1]);
  }
  testing::ProcessCluster cluster;
  Check(cluster.Start(), "start cluster");
  Result<std::unique_ptr<Client>> connected = cluster.NewClient();
  Check(connected.status(), "connect");
  Client& client = **connected;
  const Caller caller{};

  // Sequential write of one big file, 1 MiB writes.
  const std::string block = testing::RandomBytes(kMiB, 1);
  std::span<const std::byte> block_bytes(reinterpret_cast<const std::byte*>(block.data()),
                                         block.size());
  auto start = Clock::now();
  Result<Client::Opened> big = client.Create(kRootInode, "big", 0644, O_WRONLY | O_CREAT, caller);
  Check(big.status(), "create big");
  for (uint64_t i = 0; i < big_mib; ++i) {
    Check(client.Write(*big->file, i * kMiB, block_bytes).status(), "write big");
  }
  Check(client.Release(std::move(big->file)), "close big");
  const double write_s = Seconds(start);

  // Sequential read, 1 MiB reads.
  Result<Attributes> attr = client.Resolve("/big", caller);
  Check(attr.status(), "resolve big");
  std::vector<std::byte> buf(kMiB);
  start = Clock::now();
  Result<Client::Opened> rd = client.Open(attr->inode, O_RDONLY, caller);
  Check(rd.status(), "open big");
  uint64_t read_bytes = 0;
  for (uint64_t i = 0; i < big_mib; ++i) {
    Result<size_t> n = client.Read(*rd->file, i * kMiB, buf);
    Check(n.status(), "read big");
    if (std::memcmp(buf.data(), block.data(), kMiB) != 0) {
      std::cerr << "read big: wrong bytes at MiB " << i << "\n";
      return 1;
    }
    read_bytes += *n;
  }
  Check(client.Release(std::move(rd->file)), "close big reader");
  const double read_s = Seconds(start);

  // Small files of 4..256 KiB: create + write + close, then open + read + close.
  Result<Attributes> dir = client.Mkdir(kRootInode, "small", 0755, caller);
  Check(dir.status(), "mkdir");
  const std::string payload = testing::RandomBytes(256 * kKiB, 2);
  uint64_t small_bytes = 0;
  start = Clock::now();
  for (int i = 0; i < small_files; ++i) {
    const size_t size = (4 * kKiB) << (i % 7);  // 4, 8, ..., 256 KiB
    Result<Client::Opened> f =
        client.Create(dir->inode, "f" + std::to_string(i), 0644, O_WRONLY | O_CREAT, caller);
    Check(f.status(), "create small");
    Check(client
              .Write(*f->file, 0,
                     std::span<const std::byte>(
                         reinterpret_cast<const std::byte*>(payload.data()), size))
              .status(),
          "write small");
    Check(client.Release(std::move(f->file)), "close small");
    small_bytes += size;
  }
  const double small_write_s = Seconds(start);
  std::vector<std::byte> sbuf(256 * kKiB);
  start = Clock::now();
  for (int i = 0; i < small_files; ++i) {
    Result<Attributes> a = client.Lookup(dir->inode, "f" + std::to_string(i), caller);
    Check(a.status(), "lookup small");
    Result<Client::Opened> f = client.Open(a->inode, O_RDONLY, caller);
    Check(f.status(), "open small");
    Check(client.Read(*f->file, 0, sbuf).status(), "read small");
    Check(client.Release(std::move(f->file)), "close small reader");
  }
  const double small_read_s = Seconds(start);

  const double mib = static_cast<double>(big_mib);
  const double small_mib = static_cast<double>(small_bytes) / kMiB;
  std::printf("%-34s %12s\n", "measure", "value");
  std::printf("%-34s %12.1f\n", "seq_write_MiB_per_s", mib / write_s);
  std::printf("%-34s %12.1f\n", "seq_read_MiB_per_s", mib / read_s);
  std::printf("%-34s %12.1f\n", "small_create_write_files_per_s", small_files / small_write_s);
  std::printf("%-34s %12.1f\n", "small_create_write_MiB_per_s", small_mib / small_write_s);
  std::printf("%-34s %12.1f\n", "small_read_files_per_s", small_files / small_read_s);
  std::printf("%-34s %12.1f\n", "small_read_MiB_per_s", small_mib / small_read_s);
  nlohmann::json j = {{"bench", "client"},
                      {"big_file_mib", big_mib},
                      {"seq_write_mib_per_s", mib / write_s},
                      {"seq_read_mib_per_s", mib / read_s},
                      {"small_files", small_files},
                      {"small_create_write_files_per_s", small_files / small_write_s},
                      {"small_create_write_mib_per_s", small_mib / small_write_s},
                      {"small_read_files_per_s", small_files / small_read_s},
                      {"small_read_mib_per_s", small_mib / small_read_s},
                      {"layout", "k=4 m=2 unit=1MiB, 6 data servers on one host"}};
  std::cout << j.dump() << std::endl;
  return 0;
}
