// The operators' HTTP endpoint and the metrics registry: addresses are checked, routes answer
// exactly, other paths and methods are refused, and /metrics carries what was counted.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <gtest/gtest.h>

#include "common/http_endpoint.h"
#include "common/metrics.h"

namespace aquifer {
namespace {

TEST(ListenAddressTest, AcceptsHostPortAndRejectsTheRest) {
  struct Case {
    const char* text;
    bool ok;
    const char* host;
    uint16_t port;
  };
  const Case cases[] = {
      {"127.0.0.1:9100", true, "127.0.0.1", 9100},
      {"localhost:0", true, "localhost", 0},
      {"[::1]:65535", true, "::1", 65535},
      {"0.0.0.0:80", true, "0.0.0.0", 80},
      {"127.0.0.1", false, "", 0},
      {":9100", false, "", 0},
      {"127.0.0.1:", false, "", 0},
      {"127.0.0.1:65536", false, "", 0},
      {"127.0.0.1:-1", false, "", 0},
      {"127.0.0.1:12ab", false, "", 0},
      {"::1:9100", false, "", 0},
      {"[::1:9100", false, "", 0},
      {"ho st:1", false, "", 0},
      {"host\n:1", false, "", 0},
  };
  for (const Case& c : cases) {
    auto parsed = ParseListenAddress(c.text);
    EXPECT_EQ(parsed.ok(), c.ok) << c.text;
    if (parsed.ok() && c.ok) {
      EXPECT_EQ(parsed->first, c.host) << c.text;
      EXPECT_EQ(parsed->second, c.port) << c.text;
    }
    if (!parsed.ok()) EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument) << c.text;
  }
}

TEST(HttpEndpointTest, ServesExactRoutesOnAKernelChosenPort) {
  auto http = HttpEndpoint::Start("127.0.0.1:0",
                                  {{"/hello", [] { return HttpReply{200, "text/plain", "hi\n"}; }},
                                   {"/boom", []() -> HttpReply { throw std::runtime_error("x"); }}});
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  const std::string address = (*http)->address();
  ASSERT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
  const int port = std::stoi(address.substr(address.find(':') + 1));
  ASSERT_GT(port, 0);
  httplib::Client client("127.0.0.1", port);
  auto ok = client.Get("/hello?x=1");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "hi\n");
  auto missing = client.Get("/hello/");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto post = client.Post("/hello", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  auto boom = client.Get("/boom");
  ASSERT_TRUE(boom);
  EXPECT_EQ(boom->status, 500);
  (*http)->Stop();
  (*http)->Stop();  // idempotent
  EXPECT_FALSE(client.Get("/hello"));
}

TEST(HttpEndpointTest, RefusesABoundPortAndBadRoutes) {
  auto first = HttpEndpoint::Start("127.0.0.1:0", {{"/a", [] { return HttpReply{}; }}});
  ASSERT_TRUE(first.ok());
  auto second = HttpEndpoint::Start((*first)->address(), {{"/a", [] { return HttpReply{}; }}});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kUnavailable);
  auto bad = HttpEndpoint::Start("127.0.0.1:0", {{"a", [] { return HttpReply{}; }}});
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  auto threads = HttpEndpoint::Start("127.0.0.1:0", {}, 0);
  EXPECT_EQ(threads.status().code(), Code::kInvalidArgument);
}

// Connections that send nothing (or keep a connection alive and go quiet) each hold one of the
// endpoint's threads; they are let go after the 2 s read and keep-alive timeouts, so a scrape
// that comes while as many of them are open as there are threads is answered within a few
// seconds. (With 2 threads and 5 s timeouts, 8 of them held a scrape for 20 s: a tester.)
TEST(HttpEndpointTest, IdleConnectionsDoNotHoldOffAScrapeForLong) {
  auto http = HttpEndpoint::Start("127.0.0.1:0",
                                  {{"/hello", [] { return HttpReply{200, "text/plain", "hi\n"}; }}});
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  const std::string address = (*http)->address();
  const int port = std::stoi(address.substr(address.find(':') + 1));
  std::vector<int> idle;
  for (int i = 0; i < 16; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
    idle.push_back(fd);
  }
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(12, 0);
  auto reply = client.Get("/hello");
  ASSERT_TRUE(reply) << "no answer within 12 s while 16 connections sat idle";
  EXPECT_EQ(reply->status, 200);
  for (int fd : idle) ::close(fd);
}

TEST(MetricsTest, SerializesCountersHistogramsAndCollectorsWhileTheyLive) {
  auto& ops = metrics::CounterFamily("aquifer_test_ops_total", "test operations");
  ops.Add({{"op", "read"}}).Increment(3);
  auto& latency = metrics::HistogramFamily("aquifer_test_op_seconds", "test latency");
  latency.Add({{"op", "read"}}, metrics::LatencyBuckets()).Observe(0.002);
  std::string text;
  {
    metrics::Collector queue([] {
      return std::vector<prometheus::MetricFamily>{metrics::Gauge(
          "aquifer_test_queue", "test queue", {{{{"server", "ds1"}}, 7}})};
    });
    text = metrics::Serialize();
    EXPECT_NE(text.find("aquifer_test_queue{server=\"ds1\"} 7"), std::string::npos) << text;
  }
  EXPECT_NE(text.find("# TYPE aquifer_test_ops_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("aquifer_test_ops_total{op=\"read\"} 3"), std::string::npos) << text;
  EXPECT_NE(text.find("aquifer_test_op_seconds_bucket{op=\"read\",le=\"0.0025\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("aquifer_test_op_seconds_count{op=\"read\"} 1"), std::string::npos) << text;
  // The collector's handle is gone: its family is no longer served.
  EXPECT_EQ(metrics::Serialize().find("aquifer_test_queue"), std::string::npos);
}

}  // namespace
}  // namespace aquifer
