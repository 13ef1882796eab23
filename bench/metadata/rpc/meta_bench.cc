// meta_bench: creates, lookups, getattrs and readdir entries per second through gRPC against a
// real aquifer-meta (127.0.0.1, port 0, scratch RocksDB under /tmp), with 1 and 8 client
// threads, each thread on its own channel. Prints a table and JSON.
//
// usage: meta_bench [--files N] [--threads 1,8] [--json FILE] [--meta PATH]
//   --files N: files created per run (split over the threads), default 20000.
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "meta_process.h"
#include "common/logging.h"
#include "metadata/metadata_service.h"

using aquifer::meta::testing::Ctx;
using aquifer::meta::testing::MetaProcess;
using aquifer::meta::testing::NewScratchDir;
using aquifer::meta::testing::RegisterServers;
namespace pb = aquifer::rpc;

namespace {

struct Result {
  std::string op;
  int threads;
  uint64_t ops;
  double seconds;
  uint64_t errors;
  double per_second() const { return seconds > 0 ? ops / seconds : 0; }
};

// Runs fn(thread_index, stub) on `threads` threads, each with its own channel; returns seconds.
template <class Fn>
double RunThreads(const std::string& address, int threads, Fn fn) {
  std::vector<std::unique_ptr<pb::MetaService::Stub>> stubs;
  for (int t = 0; t < threads; ++t) {
    grpc::ChannelArguments args;
    args.SetInt("aquifer.bench.channel", t);
    stubs.push_back(pb::MetaService::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready++;
      while (!go.load()) std::this_thread::yield();
      fn(t, *stubs[t]);
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  auto start = std::chrono::steady_clock::now();
  go = true;
  for (auto& th : pool) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t files = 20000;
  std::vector<int> thread_counts = {1, 8};
  std::string json_path, meta = AQUIFER_META_BIN;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--files") {
      files = std::stoull(next());
    } else if (a == "--threads") {
      thread_counts.clear();
      std::stringstream ss(next());
      std::string tok;
      while (std::getline(ss, tok, ',')) thread_counts.push_back(std::stoi(tok));
    } else if (a == "--json") {
      json_path = next();
    } else if (a == "--meta") {
      meta = next();
    } else {
      std::cerr << "usage: meta_bench [--files N] [--threads 1,8] [--json FILE] [--meta PATH]\n";
      return 2;
    }
  }
  std::string dir = NewScratchDir("bench");
  MetaProcess proc(meta, dir);
  if (!proc.Start()) {
    std::cerr << "meta_bench: aquifer-meta did not start\n";
    return 1;
  }
  if (!RegisterServers(proc.stub(), 6)) {
    std::cerr << "meta_bench: register servers failed\n";
    return 1;
  }

  std::vector<Result> results;
  for (int threads : thread_counts) {
    // One shared directory per run: all threads create into it.
    pb::MkdirRequest mk;
    mk.set_parent(1);
    mk.set_name("run-" + std::to_string(threads));
    mk.set_mode(0755);
    pb::AttrResponse dir_attr;
    if (!proc.stub().Mkdir(Ctx().get(), mk, &dir_attr).ok() || dir_attr.status().code() != 0) {
      std::cerr << "meta_bench: mkdir failed\n";
      return 1;
    }
    const uint64_t parent = dir_attr.attr().ino();
    const uint64_t per_thread = files / threads;
    std::vector<std::vector<uint64_t>> inos(threads);
    std::atomic<uint64_t> errors{0};

    double secs = RunThreads(proc.address(), threads, [&](int t, pb::MetaService::Stub& stub) {
      pb::CreateRequest req;
      req.set_parent(parent);
      req.set_mode(S_IFREG | 0644);
      req.set_exclusive(true);
      pb::CreateResponse resp;
      for (uint64_t i = 0; i < per_thread; ++i) {
        req.set_name("f" + std::to_string(t) + "-" + std::to_string(i));
        grpc::ClientContext ctx;
        if (!stub.Create(&ctx, req, &resp).ok() || resp.status().code() != 0) {
          errors++;
          continue;
        }
        inos[t].push_back(resp.attr().ino());
      }
    });
    results.push_back({"create", threads, per_thread * threads, secs, errors.exchange(0)});

    secs = RunThreads(proc.address(), threads, [&](int t, pb::MetaService::Stub& stub) {
      pb::LookupRequest req;
      req.set_parent(parent);
      pb::AttrResponse resp;
      for (uint64_t i = 0; i < per_thread; ++i) {
        req.set_name("f" + std::to_string(t) + "-" + std::to_string(i));
        grpc::ClientContext ctx;
        if (!stub.Lookup(&ctx, req, &resp).ok() || resp.status().code() != 0) errors++;
      }
    });
    results.push_back({"lookup", threads, per_thread * threads, secs, errors.exchange(0)});

    const int rounds = 2;
    secs = RunThreads(proc.address(), threads, [&](int t, pb::MetaService::Stub& stub) {
      pb::GetAttrRequest req;
      pb::AttrResponse resp;
      for (int r = 0; r < rounds; ++r) {
        for (uint64_t ino : inos[t]) {
          req.set_ino(ino);
          grpc::ClientContext ctx;
          if (!stub.GetAttr(&ctx, req, &resp).ok() || resp.status().code() != 0) errors++;
        }
      }
    });
    uint64_t getattrs = 0;
    for (auto& v : inos) getattrs += v.size() * rounds;
    results.push_back({"getattr", threads, getattrs, secs, errors.exchange(0)});

    // readdirplus of the whole directory, once per thread.
    std::atomic<uint64_t> entries{0};
    secs = RunThreads(proc.address(), threads, [&](int, pb::MetaService::Stub& stub) {
      pb::ReadDirRequest req;
      req.set_ino(parent);
      req.set_max_entries(1024);
      req.set_plus(true);
      bool eof = false;
      uint64_t cookie = 0;
      while (!eof) {
        req.set_cookie(cookie);
        pb::ReadDirResponse resp;
        grpc::ClientContext ctx;
        if (!stub.ReadDir(&ctx, req, &resp).ok() || resp.status().code() != 0) {
          errors++;
          break;
        }
        for (const auto& e : resp.entries()) cookie = e.cookie();
        entries += resp.entries_size();
        eof = resp.eof() || resp.entries_size() == 0;
      }
    });
    results.push_back({"readdirplus_entries", threads, entries.load(), secs, errors.exchange(0)});
  }

  // The same operations on the service core in this process (RocksDB, no gRPC): what the
  // server's own work costs per operation, to set beside the gRPC figures.
  {
    using namespace aquifer::meta;
    aquifer::SetupLogging("warn");
    MetaOptions o;
    o.db = dir + "/core-db";
    auto store = OpenRocksStore(o.db);
    auto svc = store.ok() ? MetadataService::Open(std::move(*store), o)
                          : aquifer::Result<std::unique_ptr<MetadataService>>(store.status());
    if (!svc.ok()) {
      std::cerr << "meta_bench: core open failed: " << svc.status().ToString() << "\n";
      return 1;
    }
    for (int i = 0; i < 6; ++i) {
      (void)(*svc)->RegisterServer(ServerRegistration{"x:" + std::to_string(i), "fd" + std::to_string(i),
                                                       1, 0, "u" + std::to_string(i)});
    }
    auto d = (*svc)->Mkdir(aquifer::kRootInode, "core", 0755, Caller{});
    if (!d.ok()) return 1;
    std::vector<aquifer::InodeId> made;
    uint64_t errs = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < files; ++i) {
      CreateArgs a{d->ino, "f" + std::to_string(i), S_IFREG | 0644, 0, true, aquifer::SessionId(), false};
      auto r = (*svc)->Create(a, Caller{});
      if (r.ok()) made.push_back(r->attr.ino); else errs++;
    }
    auto secs = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    results.push_back({"core_create", 1, files, secs(), errs});
    t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < files; ++i) errs += !(*svc)->Lookup(d->ino, "f" + std::to_string(i), Caller{}).ok();
    results.push_back({"core_lookup", 1, files, secs(), 0});
    t0 = std::chrono::steady_clock::now();
    for (auto ino : made) errs += !(*svc)->GetAttr(ino).ok();
    results.push_back({"core_getattr", 1, made.size(), secs(), 0});
  }

  std::printf("%-22s %8s %10s %10s %12s %7s\n", "op", "threads", "ops", "seconds", "ops/s",
              "errors");
  nlohmann::json out = nlohmann::json::array();
  for (const Result& r : results) {
    std::printf("%-22s %8d %10llu %10.3f %12.0f %7llu\n", r.op.c_str(), r.threads,
                static_cast<unsigned long long>(r.ops), r.seconds, r.per_second(),
                static_cast<unsigned long long>(r.errors));
    out.push_back({{"op", r.op},
                   {"threads", r.threads},
                   {"ops", r.ops},
                   {"seconds", r.seconds},
                   {"ops_per_second", r.per_second()},
                   {"errors", r.errors}});
  }
  std::cout << out.dump() << "\n";
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  proc.Kill(SIGTERM);
  std::filesystem::remove_all(dir);
  uint64_t total_errors = 0;
  for (const Result& r : results) total_errors += r.errors;
  return total_errors == 0 ? 0 : 1;
}
