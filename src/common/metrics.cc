#include "common/metrics.h"

#include <prometheus/text_serializer.h>

#include <map>
#include <mutex>

namespace aquifer::metrics {
namespace {

struct Collectors {
  std::mutex mu;  // held while collectors run, so a handle's destructor waits for its call
  std::map<uint64_t, CollectorFn> fns;
  uint64_t next_id = 1;
};

Collectors& AllCollectors() {
  static Collectors* c = new Collectors();  // never destroyed: daemons' threads outlive exit
  return *c;
}

prometheus::MetricFamily Family(const std::string& name, const std::string& help,
                                prometheus::MetricType type, const std::vector<Sample>& samples) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  for (const Sample& s : samples) {
    prometheus::ClientMetric m;
    for (const auto& [k, v] : s.labels) m.label.push_back({k, v});
    if (type == prometheus::MetricType::Counter) {
      m.counter.value = s.value;
    } else {
      m.gauge.value = s.value;
    }
    f.metric.push_back(std::move(m));
  }
  return f;
}

}  // namespace

prometheus::Registry& Registry() {
  static prometheus::Registry* r = new prometheus::Registry();
  return *r;
}

prometheus::Family<prometheus::Counter>& CounterFamily(const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(Registry());
}

prometheus::Family<prometheus::Histogram>& HistogramFamily(const std::string& name,
                                                           const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(Registry());
}

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries b = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
      0.025,   0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  return b;
}

prometheus::MetricFamily Gauge(const std::string& name, const std::string& help,
                               const std::vector<Sample>& samples) {
  return Family(name, help, prometheus::MetricType::Gauge, samples);
}

prometheus::MetricFamily Counter(const std::string& name, const std::string& help,
                                 const std::vector<Sample>& samples) {
  return Family(name, help, prometheus::MetricType::Counter, samples);
}

Collector::Collector(CollectorFn collect) {
  Collectors& c = AllCollectors();
  std::lock_guard lock(c.mu);
  id_ = c.next_id++;
  c.fns[id_] = std::move(collect);
}

Collector::~Collector() {
  if (id_ == 0) return;
  Collectors& c = AllCollectors();
  std::lock_guard lock(c.mu);
  c.fns.erase(id_);
}

Collector::Collector(Collector&& other) noexcept : id_(other.id_) { other.id_ = 0; }

Collector& Collector::operator=(Collector&& other) noexcept {
  if (this != &other) {
    this->~Collector();
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

std::string Serialize() {
  std::vector<prometheus::MetricFamily> families = Registry().Collect();
  {
    Collectors& c = AllCollectors();
    std::lock_guard lock(c.mu);
    for (const auto& [id, fn] : c.fns) {
      for (auto& f : fn()) families.push_back(std::move(f));
    }
  }
  return prometheus::TextSerializer().Serialize(families);
}

HttpReply MetricsReply() {
  return HttpReply{200, "text/plain; version=0.0.4; charset=utf-8", Serialize()};
}

}  // namespace aquifer::metrics
