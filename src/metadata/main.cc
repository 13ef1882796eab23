// aquifer-meta: the metadata server process. Flags: see options.h or --help.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "cli/rpc/meta_admin.h"
#include "cli/status_page.h"
#include "common/allocator.h"
#include "common/http_endpoint.h"
#include "common/lock_checks.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/cluster_key.h"
#include "common/tls.h"
#include "common/port_file.h"
#include "metadata/meta_metrics.h"
#include "metadata/metadata_service.h"
#include "metadata/options.h"
#include "metadata/rpc/meta_rpc.h"


int main(int argc, char** argv) {
  using namespace aquifer;
  using namespace aquifer::meta;
  std::string help;
  auto options = ParseMetaOptions(argc, argv, &help);
  if (!help.empty()) {
    std::cout << help;
    return 0;
  }
  if (!options.ok()) {
    std::cerr << "aquifer-meta: " << options.status().ToString() << "\n";
    return 2;
  }
  SetupLogging(options->log_level);
  {
    const std::string key_path = KeyFilePath(options->key);
    if (Status st = LoadKeyForProcess(key_path); !st.ok()) {
      std::cerr << "aquifer-meta: cluster key: " << st.ToString() << "\n";
      return 2;
    }
    if (key_path.empty()) {
      Logger("meta")->warn("no cluster key (--key, key =, $AQUIFER_KEY_FILE): every connection is "
                         "served unauthenticated");
    } else {
      Logger("meta")->info("cluster key file={}", key_path);
    }
    Result<std::shared_ptr<const Tls>> tls = LoadTlsForProcess(
        options->tls,
        {options->tls_ca, options->tls_cert, options->tls_key, options->tls_server_name},
        /*server=*/true);
    if (!tls.ok()) {
      std::cerr << "aquifer-meta: TLS: " << tls.status().ToString() << "\n";
      return 2;
    }
    if (*tls != nullptr) {
      Logger("meta")->info("TLS on: certificate={} ca={} server_name={}", options->tls_cert,
                           options->tls_ca, options->tls_server_name);
    }
  }
  TuneAllocator();
  DisableMutexDeadlockDetection();
  auto log = Logger("meta");

  // Block SIGTERM/SIGINT in every thread; the main thread waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a peer gone mid-write is an error return, not a signal (TLS)

  auto store = OpenRocksStore(options->db);
  if (!store.ok()) {
    log->error("open store failed: {}", store.status().ToString());
    return 1;
  }
  auto service = MetadataService::Open(std::move(*store), *options);
  if (!service.ok()) {
    log->error("load failed: {}", service.status().ToString());
    return 1;
  }
  auto server = MetaRpcServer::Start(service->get(), options->listen, options->rpc_threads,
                                     options->wire == 1,
                                     static_cast<uint16_t>(options->wire_port), options->clients,
                                     std::chrono::seconds(options->capability_lifetime_s));
  if (!server.ok()) {
    log->error("start rpc failed: {}", server.status().ToString());
    return 1;
  }

  // /metrics and the status page, before anything else starts: a port that cannot be bound ends
  // the process here, cleanly. The page asks this server's own gRPC port, as `aquifer status`
  // does, so both show the same answers and the same health.
  metrics::Collector state_metrics = RegisterMetaMetrics(service->get());
  std::unique_ptr<HttpEndpoint> http;
  if (!options->http_listen.empty()) {
    const std::string self = (*server)->address();
    auto page = [self] {
      using std::chrono::milliseconds;
      cli::StatusPageInput in;
      in.meta_address = self;
      in.view = cli::FetchClusterView(self, milliseconds(3000));
      in.moves = cli::FetchMoves(self, milliseconds(3000));
      in.activity = cli::FetchActivity(self, 50, milliseconds(3000));
      in.now_unix_ms = std::chrono::duration_cast<milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
      return HttpReply{200, "text/html; charset=utf-8", cli::RenderStatusPage(in)};
    };
    auto started = ServeHttp(
        options->http_listen, options->http_port_file,
        {{"/metrics", [] { return metrics::MetricsReply(); }}, {"/", page}, {"/status", page}});
    if (!started.ok()) {
      log->error("start http failed: {}", started.status().ToString());
      return 1;
    }
    http = std::move(*started);
    (*service)->set_http_address(http->address());
    log->info("http address={} (/metrics, /status)", http->address());
  }

  // Expire sessions and mark silent servers down, a few times per timeout.
  std::mutex tick_mu;
  std::condition_variable tick_cv;
  bool stopping = false;
  const auto period = std::chrono::milliseconds(std::clamp<uint32_t>(
      std::min(options->heartbeat_timeout_ms, options->session_ttl_ms) / 10, 5, 500));
  std::thread ticker([&] {
    std::unique_lock lock(tick_mu);
    auto last = std::chrono::steady_clock::now();
    while (!stopping) {
      tick_cv.wait_for(lock, period, [&] { return stopping; });
      if (stopping) break;
      lock.unlock();
      // A tick far later than its period means this process was stopped or starved: that
      // silence is ours, not the data servers' or the clients'.
      const auto now = std::chrono::steady_clock::now();
      const auto late = std::chrono::duration_cast<std::chrono::milliseconds>(now - last - period);
      if (late.count() > static_cast<int64_t>(options->heartbeat_timeout_ms / 2)) {
        (*service)->DiscountPause(late.count());
      }
      (*service)->Tick();
      last = std::chrono::steady_clock::now();
      lock.lock();
    }
  });

  if (!options->port_file.empty()) {
    Status st = WritePortFile(options->port_file, (*server)->address());
    if (!st.ok()) {
      log->error("port file failed: {}", st.ToString());
      return 1;
    }
  }
  log->info("serving address={} wire_port={} db={} k={} m={} unit_bytes={}",
            (*server)->address(), (*server)->wire_port(), options->db, options->k, options->m,
            options->unit_bytes);

  int sig = 0;
  sigwait(&signals, &sig);
  log->info("shutdown signal={}", sig);
  if (http) http->Stop();
  (*server)->Shutdown();
  {
    std::lock_guard lock(tick_mu);
    stopping = true;
  }
  tick_cv.notify_all();
  ticker.join();
  Status synced = (*service)->Sync();
  if (!synced.ok()) log->error("final sync failed: {}", synced.ToString());
  server->reset();
  service->reset();
  log->info("stopped");
  return 0;
}
