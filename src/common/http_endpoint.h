// A small HTTP/1.1 server for operators: every daemon's /metrics (Prometheus text format,
// docs/metrics.md) and aquifer-meta's status page (/ and /status). cpp-httplib underneath.
//
//   auto http = HttpEndpoint::Start("127.0.0.1:9100",
//                                   {{"/metrics", [] { return MetricsReply(); }}});
//   log->info("http address={}", (*http)->address());
//
// Only GET (and HEAD) of the listed paths are answered; any other path gets 404, any other
// method httplib knows 405 (one it does not know, 400). Query strings are ignored. Handlers run
// on the endpoint's own threads (`threads` of them, 1..32), concurrently with each other and
// with the rest of the process, so they must be thread-safe; a handler that throws gets a 500
// reply. Each open connection holds a thread: an idle kept-alive connection is closed after
// 2 s, and a read waits at most 2 s for more bytes. That bounds each read, not a whole request:
// `threads` clients that trickle a byte every second can keep the endpoint busy (a limit of
// httplib's thread-per-connection model; docs/design.md "Known limits").
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "aquifer/status.h"

namespace httplib {
class Server;
}

namespace aquifer {

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpReply()>;

// Splits "HOST:PORT" (PORT 0..65535; 0 = the kernel chooses; HOST a name or IPv4 address, or
// an IPv6 address in brackets). Errors: kInvalidArgument naming what is wrong.
Result<std::pair<std::string, uint16_t>> ParseListenAddress(std::string_view listen);

class HttpEndpoint {
 public:
  // Binds `listen` (see ParseListenAddress) and serves `routes` (exact paths, e.g. "/metrics")
  // until Stop or destruction. Errors: kInvalidArgument for a bad address, route or thread
  // count; kUnavailable when the address cannot be bound (in use, not local).
  static Result<std::unique_ptr<HttpEndpoint>> Start(std::string_view listen,
                                                     std::map<std::string, HttpHandler> routes,
                                                     int threads = 8);
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // The bound HOST:PORT (the port the kernel chose when 0 was asked for).
  const std::string& address() const { return address_; }
  // Stops accepting, waits for running handlers to return. Idempotent.
  void Stop();

 private:
  HttpEndpoint() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string address_;
};

// A daemon's endpoint: Start(listen, routes), then, when `port_file` is not empty, its bound
// address written there (port_file.h), so a caller that asked for port 0 learns the port.
// Errors: those of Start, or kInternal when the port file cannot be written (the endpoint is
// stopped then).
Result<std::unique_ptr<HttpEndpoint>> ServeHttp(std::string_view listen,
                                                const std::string& port_file,
                                                std::map<std::string, HttpHandler> routes);

}  // namespace aquifer
