// aquifer-data: the data server binary. Serves chunks until SIGTERM or SIGINT, then stops cleanly.
#include <signal.h>

#include <cstdio>
#include <iostream>

#include "common/allocator.h"
#include "common/cluster_key.h"
#include "common/tls.h"
#include "common/http_endpoint.h"
#include "common/lock_checks.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "server/data_metrics.h"
#include "server/options.h"
#include "server/rpc/grpc_data_server.h"

int main(int argc, char** argv) {
  std::string help;
  auto options = aquifer::server::ParseDataServerOptions(argc, argv, &help);
  if (!help.empty()) {
    std::fputs(help.c_str(), stdout);
    return 0;
  }
  if (!options.ok()) {
    std::fprintf(stderr, "aquifer-data: %s\n", options.status().ToString().c_str());
    return 2;
  }
  aquifer::SetupLogging(options->log_level);
  {
    const std::string key_path = aquifer::KeyFilePath(options->key);
    if (aquifer::Status st = aquifer::LoadKeyForProcess(key_path); !st.ok()) {
      std::cerr << "aquifer-data: cluster key: " << st.ToString() << "\n";
      return 2;
    }
    if (key_path.empty()) {
      aquifer::Logger("data")->warn("no cluster key (--key, key =, $AQUIFER_KEY_FILE): every connection is "
                         "served unauthenticated");
    } else {
      aquifer::Logger("data")->info("cluster key file={}", key_path);
    }
    aquifer::Result<std::shared_ptr<const aquifer::Tls>> tls = aquifer::LoadTlsForProcess(
        options->tls,
        {options->tls_ca, options->tls_cert, options->tls_key, options->tls_server_name},
        /*server=*/true);
    if (!tls.ok()) {
      std::cerr << "aquifer-data: TLS: " << tls.status().ToString() << "\n";
      return 2;
    }
    if (*tls != nullptr) {
      aquifer::Logger("data")->info("TLS on: certificate={} ca={} server_name={}",
                                    options->tls_cert, options->tls_ca,
                                    options->tls_server_name);
    }
  }
  aquifer::TuneAllocator();
  aquifer::DisableMutexDeadlockDetection();
  // Block the stop signals in every thread (they inherit this mask); the main thread waits.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // /metrics (docs/metrics.md), bound before the server serves or registers: a port that cannot
  // be bound ends the process before it joins the cluster.
  std::unique_ptr<aquifer::HttpEndpoint> http;
  if (!options->http_listen.empty()) {
    auto started =
        aquifer::ServeHttp(options->http_listen, options->http_port_file,
                           {{"/metrics", [] { return aquifer::metrics::MetricsReply(); }}});
    if (!started.ok()) {
      aquifer::Logger("data")->error("start http failed: {}", started.status().ToString());
      return 1;
    }
    http = std::move(*started);
    aquifer::Logger("data")->info("http address={} (/metrics)", http->address());
  }

  auto server = aquifer::server::GrpcDataServer::Start(*options);
  if (!server.ok()) {
    aquifer::Logger("data")->error("start failed: {}", server.status().ToString());
    return 1;
  }
  // The store, scrub and move state, read at each scrape; chunk requests are counted where they
  // are served.
  aquifer::metrics::Collector state_metrics =
      aquifer::server::RegisterDataMetrics(&(*server)->core());
  int sig = 0;
  sigwait(&stop, &sig);
  aquifer::Logger("data")->info("received signal={}, stopping", sig);
  if (http) http->Stop();
  (*server)->Shutdown();
  return 0;
}
