#include "cli/status_page.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <sstream>

#include "cli/status_report.h"

namespace aquifer::cli {

namespace {

const char* kStyle = R"(
body{font-family:"DejaVu Sans",sans-serif;margin:1.2em;color:#1b1f24;background:#fafbfc}
h1{font-size:1.35em;margin:0 0 .4em} h2{font-size:1.1em;margin:1.4em 0 .4em}
table{border-collapse:collapse;font-size:.9em} td,th{padding:.25em .7em;text-align:left;
white-space:nowrap;
border-bottom:1px solid #dde1e5} th{background:#eef1f4} td.num{text-align:right}
.health{padding:.6em 1em;border-radius:4px;font-weight:bold;margin:.4em 0 1em}
.h-ok{background:#d7f5dd;color:#0b5b1d} .h-warn{background:#fff1c2;color:#6b4d00}
.h-bad{background:#ffd6d6;color:#8a0000}
.up{color:#0b7a25;font-weight:bold} .down{color:#b00000;font-weight:bold}
.bar{display:inline-block;width:9em;height:.8em;background:#e3e6ea;vertical-align:middle;
border-radius:2px;overflow:hidden} .bar span{display:block;height:100%;background:#3a78c3}
.bar span.full{background:#c33a3a} .muted{color:#68717a} .sev-warning{color:#8a5a00}
.sev-error{color:#b00000;font-weight:bold} ul{margin:.2em 0}
)";

std::string Num(uint64_t n) { return std::to_string(n); }

std::string Bar(uint64_t done, uint64_t total, bool alarm) {
  const double pct = total == 0 ? 0.0 : std::min(100.0, 100.0 * done / total);
  char buf[160];
  std::snprintf(buf, sizeof(buf), "<span class=\"bar\"><span%s style=\"width:%.1f%%\"></span>"
                "</span> %.0f%%", alarm ? " class=\"full\"" : "", pct, pct);
  return buf;
}

std::string UtcTime(int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

const char* HealthClass(HealthState s) {
  switch (s) {
    case HealthState::kOk: return "h-ok";
    case HealthState::kMountDown:
    case HealthState::kNearlyFull:
    case HealthState::kDegraded:
    case HealthState::kWaitingForServer: return "h-warn";
    default: return "h-bad";
  }
}


void Servers(std::ostringstream& o, const ClusterView& v) {
  o << "<h2>Data servers</h2>\n";
  if (v.servers.empty()) {
    o << "<p class=\"muted\">No data server has registered.</p>\n";
    return;
  }
  o << "<table id=\"servers\"><tr><th>ID</th><th>Domain</th><th>Address</th><th>State</th>"
       "<th>Member</th><th>PG positions</th><th>Used / capacity</th><th></th><th>Chunks</th>"
       "<th>Corrupt found/repaired</th><th>Last heartbeat</th></tr>\n";
  for (const ServerView& s : v.servers) {
    const bool nearly_full =
        s.capacity_bytes > 0 && s.used_bytes * 100 >= s.capacity_bytes * kNearlyFullPercent;
    o << "<tr data-server=\"" << s.id.value() << "\" data-state=\"" << (s.up ? "up" : "down")
      << "\"><td>" << s.id.value() << "</td><td>" << HtmlEscape(s.failure_domain) << "</td><td>"
      << HtmlEscape(s.address) << "</td><td class=\"" << (s.up ? "up\">up" : "down\">DOWN")
      << "</td><td>" << HtmlEscape(s.state.empty() ? "in" : s.state) << "</td><td class=\"num\">"
      << s.pg_positions << "</td><td>" << HumanBytes(s.used_bytes) << " / "
      << HumanBytes(s.capacity_bytes) << "</td><td>"
      << Bar(s.used_bytes, s.capacity_bytes, nearly_full) << "</td><td class=\"num\">"
      << s.chunk_count << "</td><td class=\"num\">" << s.corrupt_found << " / "
      << s.corrupt_repaired << "</td><td>"
      << (s.last_heartbeat_ms_ago < 0 ? std::string("never")
                                      : HumanDuration(s.last_heartbeat_ms_ago) + " ago")
      << "</td></tr>\n";
  }
  o << "</table>\n";
}

void Capacity(std::ostringstream& o, const ClusterView& v) {
  o << "<h2>Capacity</h2>\n<table id=\"capacity\"><tr><th></th><th>Total</th><th>Free</th>"
       "<th>Used</th></tr>\n";
  o << "<tr><td>usable (after parity, default layout " << v.default_k << "+" << v.default_m
    << ")</td><td>" << HumanBytes(v.usable_total_bytes) << "</td><td>"
    << HumanBytes(v.usable_free_bytes) << "</td><td>"
    << Bar(v.usable_total_bytes - std::min(v.usable_total_bytes, v.usable_free_bytes),
           v.usable_total_bytes, false)
    << "</td></tr>\n<tr><td>raw (up data servers)</td><td>" << HumanBytes(v.total_bytes)
    << "</td><td>" << HumanBytes(v.free_bytes) << "</td><td>"
    << Bar(v.total_bytes - std::min(v.total_bytes, v.free_bytes), v.total_bytes, false)
    << "</td></tr>\n</table>\n<p>" << v.files << " files and directories; map version "
    << v.map_version << "; " << v.pgs.size() << " placement groups.</p>\n";
}

void Moves(std::ostringstream& o, const MovesView& mv, const ClusterView* view) {
  o << "<h2>Repair, rebalance and drain</h2>\n<p id=\"moves-summary\">" << mv.running
    << " running, " << mv.queued << " queued, " << HumanBytes(mv.bytes_left) << " left, ETA "
    << HumanDuration(mv.eta_ms) << "; " << mv.moves_completed
    << " finished since the metadata server started (at most " << mv.max_concurrent_moves
    << " per destination, " << HumanBytes(mv.move_rate_bytes_per_s) << "/s per task"
    << (mv.rebalance_paused ? "; rebalance paused" : "") << ").</p>\n";
  if (!mv.moves.empty()) {
    const std::vector<const MoveView*> rows = RunningFirst(mv);
    o << "<table id=\"moves\"><tr><th>Task</th><th>Kind</th><th>State</th><th>PG</th>"
         "<th>From</th><th>To</th><th>Progress</th><th>Bytes</th><th>Rate</th><th>ETA</th>"
         "</tr>\n";
    constexpr size_t kMaxRows = 50;
    for (size_t i = 0; i < rows.size() && i < kMaxRows; ++i) {
      const MoveView& m = *rows[i];
      o << "<tr data-kind=\"" << HtmlEscape(m.kind) << "\"><td>" << m.id << "</td><td>"
        << HtmlEscape(m.kind) << "</td><td>" << HtmlEscape(m.state) << "</td><td>" << m.pg_width
        << "/" << m.pg_index << "." << m.position << "</td><td>"
        << HtmlEscape(ServerName(m.from, view)) << "</td><td>"
        << HtmlEscape(ServerName(m.to, view)) << "</td><td>"
        << Bar(m.bytes_done, m.bytes_total, false) << "</td><td>" << HumanBytes(m.bytes_done)
        << " / " << HumanBytes(m.bytes_total) << "</td><td>" << HumanBytes(m.rate_bytes_per_s)
        << "/s</td><td>" << HumanDuration(m.eta_ms)
        << (m.error.empty() ? "" : " <span class=\"sev-error\">" + HtmlEscape(m.error) + "</span>")
        << "</td></tr>\n";
    }
    o << "</table>\n";
    if (rows.size() > kMaxRows) {
      o << "<p class=\"muted\">... and " << rows.size() - kMaxRows << " more tasks.</p>\n";
    }
  }
  if (!mv.degraded.empty()) {
    std::map<std::string, std::vector<const DegradedPgView*>> by_reason;
    for (const DegradedPgView& d : mv.degraded) by_reason[d.reason].push_back(&d);
    o << "<h2>Degraded placement groups</h2>\n<p>" << mv.degraded.size()
      << " placement groups have positions missing"
      << (mv.waiting_for_server ? "; some wait for a server (no spare failure domain)" : "")
      << ".</p>\n<table id=\"degraded\"><tr><th>Reason</th><th>PGs</th><th>Which (width/index"
         "[missing positions])</th></tr>\n";
    for (const auto& [reason, pgs] : by_reason) {
      o << "<tr><td>" << HtmlEscape(reason) << "</td><td class=\"num\">" << pgs.size()
        << "</td><td>";
      for (size_t i = 0; i < pgs.size() && i < 16; ++i) {
        o << (i ? " " : "") << pgs[i]->pg_width << "/" << pgs[i]->pg_index << "[";
        for (size_t j = 0; j < pgs[i]->positions.size(); ++j) {
          o << (j ? "," : "") << pgs[i]->positions[j];
        }
        o << "]";
      }
      if (pgs.size() > 16) o << " ...";
      o << "</td></tr>\n";
    }
    o << "</table>\n";
  }
}

void Activity(std::ostringstream& o, const ActivityView& a, int64_t now_unix_ms) {
  o << "<h2>Mounts and other clients</h2>\n";
  if (a.sessions.empty()) {
    o << "<p class=\"muted\">No open session.</p>\n";
  } else {
    o << "<table id=\"sessions\"><tr><th>Session</th><th>Client</th><th>Idle</th>"
         "<th>Inodes held</th><th>Caches</th></tr>\n";
    for (const SessionView& s : a.sessions) {
      o << "<tr><td>" << s.id << "</td><td>" << HtmlEscape(s.client_name) << "</td><td>"
        << HumanDuration(s.idle_ms) << "</td><td class=\"num\">" << s.inodes << "</td><td>"
        << (s.caches ? "yes" : "no") << "</td></tr>\n";
    }
    o << "</table>\n";
  }
  o << "<h2>Recent events</h2>\n";
  if (a.events.empty()) {
    o << "<p class=\"muted\">None since the metadata server started at "
      << UtcTime(a.started_unix_ms) << " UTC.</p>\n";
    return;
  }
  o << "<table id=\"events\"><tr><th>Time (UTC)</th><th>Age</th><th>Severity</th><th>Event</th>"
       "</tr>\n";
  for (const EventView& e : a.events) {
    o << "<tr class=\"sev-" << HtmlEscape(e.severity) << "\"><td>" << UtcTime(e.unix_ms)
      << "</td><td>" << HumanDuration(std::max<int64_t>(0, now_unix_ms - e.unix_ms))
      << "</td><td>" << HtmlEscape(e.severity) << "</td><td>" << HtmlEscape(e.text)
      << "</td></tr>\n";
  }
  o << "</table>\n";
}

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string RenderStatusPage(const StatusPageInput& in) {
  const Health health = HealthOf(in.view, &in.moves, std::nullopt);
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  if (in.refresh_seconds > 0) {
    o << "<meta http-equiv=\"refresh\" content=\"" << in.refresh_seconds << "\">\n";
  }
  o << "<title>Aquifer " << HtmlEscape(HealthName(health.state)) << " - "
    << HtmlEscape(in.meta_address) << "</title>\n<style>" << kStyle << "</style></head><body>\n";
  o << "<h1>Aquifer cluster at " << HtmlEscape(in.meta_address) << "</h1>\n";
  o << "<div id=\"health\" class=\"health " << HealthClass(health.state)
    << "\" data-health=\"" << HtmlEscape(HealthName(health.state)) << "\">Health: "
    << HtmlEscape(HealthName(health.state));
  if (!health.reasons.empty()) {
    o << "<ul>";
    for (const std::string& r : health.reasons) o << "<li>" << HtmlEscape(r) << "</li>";
    o << "</ul>";
  }
  o << "</div>\n<p class=\"muted\">As of " << UtcTime(in.now_unix_ms) << " UTC"
    << (in.refresh_seconds > 0
            ? "; this page reloads every " + std::to_string(in.refresh_seconds) + " s"
            : std::string())
    << ". The same health as <code>aquifer status</code>; metrics at <a href=\"/metrics\">"
       "/metrics</a>.</p>\n";
  const ClusterView* view = in.view.ok() ? &*in.view : nullptr;
  if (view != nullptr) {
    Capacity(o, *view);
    Servers(o, *view);
  } else {
    o << "<p class=\"sev-error\">Cluster map unavailable: "
      << HtmlEscape(in.view.status().ToString()) << "</p>\n";
  }
  if (in.moves.ok()) {
    Moves(o, *in.moves, view);
  } else {
    o << "<p class=\"sev-error\">Moves unavailable: " << HtmlEscape(in.moves.status().ToString())
      << "</p>\n";
  }
  if (in.activity.ok()) {
    Activity(o, *in.activity, in.now_unix_ms);
  } else {
    o << "<p class=\"sev-error\">Sessions and events unavailable: "
      << HtmlEscape(in.activity.status().ToString()) << "</p>\n";
  }
  o << "</body></html>\n";
  return o.str();
}

}  // namespace aquifer::cli
