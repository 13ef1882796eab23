// A gtest fixture over ProcessCluster for the client-level end-to-end tests, and ASSERT_OK.
// Include only from tests that link GTest (aquifer_testing itself does not).
#pragma once

#include <memory>
#include <utility>

#include <gtest/gtest.h>

#include "aquifer/client.h"
#include "aquifer/status.h"
#include "testing/process_cluster.h"

// Fails the test (fatally) when `expr`, an aquifer::Status, is not OK, printing it.
#define ASSERT_OK(expr)                                           \
  do {                                                            \
    const ::aquifer::Status aq_s_ = (expr);                       \
    ASSERT_TRUE(aq_s_.ok()) << #expr << ": " << aq_s_.ToString(); \
  } while (0)

// The same, not fatal.
#define EXPECT_OK(expr)                                           \
  do {                                                            \
    const ::aquifer::Status aq_s_ = (expr);                       \
    EXPECT_TRUE(aq_s_.ok()) << #expr << ": " << aq_s_.ToString(); \
  } while (0)

namespace aquifer::testing {

// Owns one ProcessCluster per test (cluster_, null until StartCluster). The cluster, and every
// process it started, goes away with the fixture, also when the test fails.
class ProcessClusterTest : public ::testing::Test {
 protected:
  // Starts a cluster with `options` into cluster_ and waits until it serves; a fatal test
  // failure (with ProcessCluster::Start's message) when it does not.
  void StartCluster(ProcessClusterOptions options = {}) {
    cluster_ = std::make_unique<ProcessCluster>(std::move(options));
    Status s = cluster_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // A new client of cluster_ (StartCluster first). On error: a non-fatal test failure and
  // nullptr, so callers ASSERT_TRUE(client).
  std::unique_ptr<Client> NewClient(ClientOptions options = {}) {
    Result<std::unique_ptr<Client>> c = cluster_->NewClient(std::move(options));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::unique_ptr<ProcessCluster> cluster_;
};

}  // namespace aquifer::testing
