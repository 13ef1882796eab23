// aquifer-data: the data server binary. Serves chunks until SIGTERM or SIGINT, then stops cleanly.
#include <signal.h>

#include <cstdio>

#include "common/allocator.h"
#include "common/lock_checks.h"
#include "common/logging.h"
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
  aquifer::TuneAllocator();
  aquifer::DisableMutexDeadlockDetection();
  // Block the stop signals in every thread (they inherit this mask); the main thread waits.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = aquifer::server::GrpcDataServer::Start(*options);
  if (!server.ok()) {
    aquifer::Logger("data")->error("start failed: {}", server.status().ToString());
    return 1;
  }
  int sig = 0;
  sigwait(&stop, &sig);
  aquifer::Logger("data")->info("received signal={}, stopping", sig);
  (*server)->Shutdown();
  return 0;
}
