#include "common/http_endpoint.h"

#include <httplib.h>

#include <charconv>

#include "common/logging.h"
#include "common/port_file.h"

namespace aquifer {

Result<std::pair<std::string, uint16_t>> ParseListenAddress(std::string_view listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgument("listen address '" + std::string(listen) + "' is not HOST:PORT");
  }
  std::string_view host = listen.substr(0, colon);
  std::string_view port_text = listen.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') {
      return InvalidArgument("listen address '" + std::string(listen) +
                             "': an IPv6 host goes in brackets, e.g. [::1]:9100");
    }
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return InvalidArgument("listen address '" + std::string(listen) +
                           "': an IPv6 host goes in brackets, e.g. [::1]:9100");
  }
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == ':' || c == '_';
    if (!ok) {
      return InvalidArgument("listen address '" + std::string(listen) +
                             "': the host has a character not allowed in a name or address");
    }
  }
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    return InvalidArgument("listen address '" + std::string(listen) +
                           "': the port must be a number in 0..65535");
  }
  return std::pair<std::string, uint16_t>(std::string(host), static_cast<uint16_t>(port));
}

Result<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(std::string_view listen,
                                                          std::map<std::string, HttpHandler> routes,
                                                          int threads) {
  auto parsed = ParseListenAddress(listen);
  if (!parsed.ok()) return parsed.status();
  if (threads < 1 || threads > 32) return InvalidArgument("http threads must be in 1..32");
  for (const auto& [path, handler] : routes) {
    if (path.empty() || path[0] != '/' || !handler) {
      return InvalidArgument("http route '" + path + "' must start with / and have a handler");
    }
  }
  std::unique_ptr<HttpEndpoint> self(new HttpEndpoint());
  self->server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *self->server_;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // A connection holds one of the `threads` workers while it is open, so idle and slow ones are
  // let go soon: 2 s for each read, 2 s of keep-alive between requests. Replies go out at once
  // (TCP_NODELAY: without it each request after the first on a kept-alive connection waited
  // about 40 ms for the client's delayed ACK).
  server.set_read_timeout(2, 0);
  server.set_write_timeout(5, 0);
  server.set_keep_alive_timeout(2);
  server.set_keep_alive_max_count(100);
  server.set_tcp_nodelay(true);
  server.set_payload_max_length(64 * 1024);
  // httplib's default also sets SO_REUSEPORT, which lets a second process bind a port that is
  // already serving and silently take half its connections: only SO_REUSEADDR here.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Every request is answered here, before httplib's own routing: the routes are exact paths
  // and only reads are served.
  server.set_pre_routing_handler(
      [routes = std::move(routes)](const httplib::Request& req, httplib::Response& res) {
        if (req.method != "GET" && req.method != "HEAD") {
          res.status = 405;
          res.set_header("Allow", "GET, HEAD");
          res.set_content("only GET and HEAD are served\n", "text/plain; charset=utf-8");
          return httplib::Server::HandlerResponse::Handled;
        }
        auto it = routes.find(req.path);
        if (it == routes.end()) {
          std::string known;
          for (const auto& [path, handler] : routes) known += path + "\n";
          res.status = 404;
          res.set_content("not found; this server has:\n" + known, "text/plain; charset=utf-8");
          return httplib::Server::HandlerResponse::Handled;
        }
        HttpReply reply;
        try {
          reply = it->second();
        } catch (const std::exception& e) {
          reply = HttpReply{500, "text/plain; charset=utf-8",
                            std::string("handler failed: ") + e.what() + "\n"};
        }
        res.status = reply.status;
        res.set_header("Cache-Control", "no-store");
        res.set_content(std::move(reply.body), reply.content_type.c_str());
        return httplib::Server::HandlerResponse::Handled;
      });
  const auto& [host, port] = *parsed;
  int bound = port;
  if (port == 0) {
    bound = server.bind_to_any_port(host);
    if (bound < 0) bound = 0;
  } else if (!server.bind_to_port(host, port)) {
    bound = 0;
  }
  if (bound <= 0) {
    return Status(Code::kUnavailable, "cannot bind http address " + std::string(listen) +
                                          " (in use, or not an address of this host)");
  }
  const bool v6 = host.find(':') != std::string::npos;
  self->address_ = (v6 ? "[" + host + "]" : host) + ":" + std::to_string(bound);
  self->thread_ = std::thread([&server] { server.listen_after_bind(); });
  // Stop before the thread runs its loop would be lost (httplib stops only a running server).
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return self;
}

void HttpEndpoint::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpEndpoint::~HttpEndpoint() { Stop(); }

Result<std::unique_ptr<HttpEndpoint>> ServeHttp(std::string_view listen,
                                                const std::string& port_file,
                                                std::map<std::string, HttpHandler> routes) {
  auto started = HttpEndpoint::Start(listen, std::move(routes));
  if (!started.ok() || port_file.empty()) return started;
  AQ_RETURN_IF_ERROR(WritePortFile(port_file, (*started)->address()));
  return started;
}

}  // namespace aquifer
