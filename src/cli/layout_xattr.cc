#include "cli/layout_xattr.h"

#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>
#include <sstream>

#include "cli/status_report.h"
#include "common/printable.h"

namespace aquifer::cli {

namespace {

// Parses a decimal number with an optional K/M/G (binary) suffix for `unit`.
Result<uint64_t> ParseNumber(std::string_view key, std::string_view text, bool allow_suffix) {
  if (text.empty()) return InvalidArgument(std::string(key) + "= needs a value");
  uint64_t mult = 1;
  char last = text.back();
  if (allow_suffix && (last == 'K' || last == 'k' || last == 'M' || last == 'm' || last == 'G' ||
                       last == 'g')) {
    mult = (last == 'K' || last == 'k') ? 1024ull : (last == 'M' || last == 'm') ? 1048576ull
                                                                                  : 1073741824ull;
    text.remove_suffix(1);
    if (text.empty()) return InvalidArgument(std::string(key) + "= needs a number");
  }
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return InvalidArgument("'" + std::string(key) + "=" + std::string(text) +
                             "': not a number");
    }
    if (v > (UINT64_MAX - 9) / 10) return InvalidArgument(std::string(key) + ": too large");
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT64_MAX / mult) return InvalidArgument(std::string(key) + ": too large");
  return v * mult;
}

Status Errno(int e, const std::string& what, const std::string& path) {
  std::string msg = what + " " + path + ": " + std::strerror(e);
  switch (e) {
    case ENOENT:
      return NotFound(msg);
    case ENOTSUP:
      return Status(Code::kNotSupported, msg + " (is it on an Aquifer mount?)");
    case EINVAL:
      return InvalidArgument(msg);
    case EACCES:
    case EPERM:
      return PermissionDenied(msg);
    default:
      return Internal(msg);
  }
}

}  // namespace

Result<LayoutSpec> ParseLayoutSpec(const std::vector<std::string>& tokens) {
  std::vector<std::string> parts;
  for (const std::string& t : tokens) {
    std::string cur;
    for (char c : t) {
      if (c == ' ' || c == ',' || c == '\t' || c == '\n') {
        if (!cur.empty()) parts.push_back(cur);
        cur.clear();
      } else {
        cur.push_back(c);
      }
    }
    if (!cur.empty()) parts.push_back(cur);
  }
  if (parts.empty()) return InvalidArgument("no layout given (expected k=K m=M unit=BYTES)");
  LayoutSpec spec;
  for (const std::string& p : parts) {
    size_t eq = p.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("'" + p + "': expected key=value (k=, m=, unit=)");
    }
    std::string key = p.substr(0, eq);
    std::string value = p.substr(eq + 1);
    if (key == "k") {
      if (spec.k) return InvalidArgument("k given twice");
      Result<uint64_t> v = ParseNumber(key, value, false);
      if (!v.ok()) return v.status();
      if (*v < 1 || *v > 16) return InvalidArgument("k=" + value + ": expected 1..16");
      spec.k = static_cast<uint32_t>(*v);
    } else if (key == "m") {
      if (spec.m) return InvalidArgument("m given twice");
      Result<uint64_t> v = ParseNumber(key, value, false);
      if (!v.ok()) return v.status();
      if (*v == 0) {
        return InvalidArgument("m=0: expected 1..4 (m=0 leaves no parity or copy: one lost "
                               "server would lose data)");
      }
      if (*v > 4) return InvalidArgument("m=" + value + ": expected 1..4");
      spec.m = static_cast<uint32_t>(*v);
    } else if (key == "unit" || key == "unit_bytes") {
      if (spec.unit_bytes) return InvalidArgument("unit given twice");
      Result<uint64_t> v = ParseNumber("unit", value, true);
      if (!v.ok()) return v.status();
      if (*v < 4096 || *v > 16 * 1048576ull || *v % 4096 != 0) {
        return InvalidArgument("unit=" + value +
                               ": expected a multiple of 4096 between 4096 and 16M bytes");
      }
      spec.unit_bytes = *v;
    } else {
      return InvalidArgument("unknown layout key '" + key + "' (expected k, m, unit)");
    }
  }
  return spec;
}

Result<LayoutSpec> CompleteLayout(const LayoutSpec& spec, const std::optional<LayoutSpec>& base) {
  LayoutSpec out = spec;
  if (base) {
    if (!out.k) out.k = base->k;
    if (!out.m) out.m = base->m;
    if (!out.unit_bytes) out.unit_bytes = base->unit_bytes;
  }
  if (!out.k || !out.m || !out.unit_bytes) {
    return InvalidArgument("k, m and unit are all needed when the path has no layout yet");
  }
  return out;
}

std::string FormatLayout(const LayoutSpec& spec) {
  std::string out;
  auto add = [&out](const std::string& s) { out += (out.empty() ? "" : " ") + s; };
  if (spec.k) add("k=" + std::to_string(*spec.k));
  if (spec.m) add("m=" + std::to_string(*spec.m));
  if (spec.unit_bytes) add("unit=" + std::to_string(*spec.unit_bytes));
  return out;
}

Result<FilePlacement> ParsePlacement(std::string_view text) {
  FilePlacement p;
  std::set<std::string> seen;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    size_t end = text.find(' ', i);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view token = text.substr(i, end - i);
    i = end;
    if (token.empty()) continue;
    const size_t eq = token.find('=');
    const std::string key(token.substr(0, eq == std::string_view::npos ? 0 : eq));
    uint32_t value = 0;
    const std::string_view digits =
        eq == std::string_view::npos ? std::string_view() : token.substr(eq + 1);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (eq == std::string_view::npos || digits.empty() || ec != std::errc() ||
        ptr != digits.data() + digits.size()) {
      return InvalidArgument("placement: bad token '" + Printable(token) + "'");
    }
    if (key == "pg_width") {
      p.pg_width = value;
    } else if (key == "pg_start") {
      p.pg_start = value;
    } else if (key == "pg_count") {
      p.pg_count = value;
    } else {
      continue;  // a later server may say more
    }
    seen.insert(key);
  }
  if (seen.size() != 3) return InvalidArgument("placement: pg_width, pg_start and pg_count needed");
  if (p.pg_count == 0 || p.pg_start >= p.pg_count || p.pg_width == 0) {
    return InvalidArgument("placement: out of range: " + Printable(text));
  }
  return p;
}

std::string DescribePlacement(uint64_t size, const LayoutSpec& layout, const FilePlacement& p,
                              const ClusterView* view, size_t max_stripes) {
  const uint64_t k = *layout.k, m = *layout.m, unit = *layout.unit_bytes;
  const uint64_t stripe_bytes = k * unit;
  std::ostringstream o;
  if (size == 0) {
    o << "  empty: no chunks\n";
    return o.str();
  }
  const uint64_t stripes = (size + stripe_bytes - 1) / stripe_bytes;
  o << "  " << HumanBytes(size) << " in " << stripes << (stripes == 1 ? " stripe" : " stripes")
    << " of up to " << HumanBytes(stripe_bytes) << " (PG width " << p.pg_width
    << ", first PG " << p.pg_start << " of " << p.pg_count << ")\n";
  // The PGs of this width, in table order.
  std::vector<const PgView*> table;
  if (view != nullptr) {
    for (const PgView& pg : view->pgs) {
      if (pg.width == p.pg_width) table.push_back(&pg);
    }
  }
  auto servers = [&](uint32_t pg_index, uint64_t positions) {
    std::string s;
    if (pg_index >= table.size()) return std::string("(PG table not available)");
    const PgView& pg = *table[pg_index];
    for (uint64_t i = 0; i < positions && i < pg.targets.size(); ++i) {
      s += (s.empty() ? "" : " ") + ServerName(ServerId(pg.targets[i]), view);
    }
    return s;
  };
  for (uint64_t s = 0; s < stripes && s < max_stripes; ++s) {
    const uint64_t len = std::min(stripe_bytes, size - s * stripe_bytes);
    const uint32_t pg_index = static_cast<uint32_t>((p.pg_start + s) % p.pg_count);
    o << "  stripe " << s << " (PG " << p.pg_width << "/" << pg_index << "): ";
    if (len < unit) {
      o << m + 1 << " copies of " << HumanBytes(len) << " on " << servers(pg_index, m + 1);
    } else {
      o << "erasure coded " << k << "+" << m << ", " << HumanBytes(len) << " in chunks of "
        << HumanBytes(unit) << " on " << servers(pg_index, k + m) << " (data, then parity)";
    }
    o << "\n";
  }
  if (stripes > max_stripes) o << "  ... " << stripes - max_stripes << " more stripes\n";
  return o.str();
}

Result<std::optional<std::string>> GetLayoutXattr(const std::string& path) {
  return GetXattrText(path, kLayoutXattr);
}

Result<std::optional<std::string>> GetXattrText(const std::string& path, const char* name) {
  std::string buf(256, '\0');
  while (true) {
    ssize_t n = ::getxattr(path.c_str(), name, buf.data(), buf.size());
    if (n >= 0) {
      buf.resize(static_cast<size_t>(n));
      while (!buf.empty() && (buf.back() == '\0' || buf.back() == '\n')) buf.pop_back();
      return std::optional<std::string>(buf);
    }
    if (errno == ENODATA) return std::optional<std::string>();
    if (errno == ERANGE && buf.size() < 65536) {
      buf.resize(buf.size() * 4);
      continue;
    }
    return Errno(errno, std::string("getxattr ") + name + " of", path);
  }
}

Status SetLayoutXattr(const std::string& path, const std::string& value) {
  if (::setxattr(path.c_str(), kLayoutXattr, value.data(), value.size(), 0) != 0) {
    return Errno(errno, "setxattr aquifer.layout on", path);
  }
  return OkStatus();
}

}  // namespace aquifer::cli
