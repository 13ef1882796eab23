// Prometheus metrics of one process (prometheus-cpp's core library underneath): every daemon
// keeps its counters, gauges and histograms in the process-wide Registry() and serves them at
// /metrics on its HTTP port (http_endpoint.h) in the text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/). docs/metrics.md is the
// catalogue: each metric, its type, labels and what an operator does when it moves.
//
// Two kinds of metric:
// - events counted where they happen: look a family up once (CounterFamily, HistogramFamily),
//   Add() its labelled children once (at start-up, or on first use through a LazyCounter), keep
//   the references and Increment / Observe them on the hot path. A child's Increment is one atomic add; a
//   histogram's Observe takes the child's own mutex (no other lock).
// - state read at scrape time (capacity, queue lengths, sessions): register a Collector, a
//   function that returns the families as they are now. It runs on the HTTP thread of the
//   scrape and must take only locks that are never held while waiting on the network.
//
// Names follow Prometheus's conventions: `aquifer_<daemon>_<what>_<unit>`, counters end in
// `_total`, durations are `_seconds`, sizes `_bytes`. Thread-safe throughout.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/http_endpoint.h"

namespace aquifer::metrics {

using Labels = std::map<std::string, std::string>;

// This process's registry.
prometheus::Registry& Registry();

prometheus::Family<prometheus::Counter>& CounterFamily(const std::string& name,
                                                       const std::string& help);
prometheus::Family<prometheus::Histogram>& HistogramFamily(const std::string& name,
                                                           const std::string& help);

// Bucket bounds for operation latencies, seconds: 50 us to 10 s, roughly x2.5 apart, which
// spans a cached stat (tens of us) to a degraded read that waits for a timeout (seconds).
const prometheus::Histogram::BucketBoundaries& LatencyBuckets();

// A counter child found on first use and kept: Family::Add takes the family's mutex and hashes
// the labels, so a hot path that picks its child at run time (by reply code, by errno) finds it
// once and then pays one atomic load. `labels` is called only the first time. Thread-safe (two
// racing first uses find the same child).
class LazyCounter {
 public:
  template <class MakeLabels>
  prometheus::Counter& Get(prometheus::Family<prometheus::Counter>& family, MakeLabels labels) {
    prometheus::Counter* c = child_.load(std::memory_order_acquire);
    if (c == nullptr) {
      c = &family.Add(labels());
      child_.store(c, std::memory_order_release);
    }
    return *c;
  }

 private:
  std::atomic<prometheus::Counter*> child_{nullptr};
};

// Builds scrape-time families: Gauge("aquifer_meta_sessions", "...", {{{}, 3}}).
struct Sample {
  Labels labels;
  double value = 0;
};
prometheus::MetricFamily Gauge(const std::string& name, const std::string& help,
                               const std::vector<Sample>& samples);
prometheus::MetricFamily Counter(const std::string& name, const std::string& help,
                                 const std::vector<Sample>& samples);

using CollectorFn = std::function<std::vector<prometheus::MetricFamily>()>;

// Registers `collect` for every scrape until the returned handle is destroyed (destruction
// waits for a running call of it to return). Move-only.
class Collector {
 public:
  Collector() = default;
  explicit Collector(CollectorFn collect);
  ~Collector();
  Collector(Collector&& other) noexcept;
  Collector& operator=(Collector&& other) noexcept;

 private:
  uint64_t id_ = 0;
};

// Everything registered, in the text format.
std::string Serialize();
// The reply for GET /metrics.
HttpReply MetricsReply();

}  // namespace aquifer::metrics
