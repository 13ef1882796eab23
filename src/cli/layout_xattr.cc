#include "cli/layout_xattr.h"

#include <sys/xattr.h>

#include <cerrno>
#include <cstring>

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

Result<std::optional<std::string>> GetLayoutXattr(const std::string& path) {
  std::string buf(256, '\0');
  while (true) {
    ssize_t n = ::getxattr(path.c_str(), kLayoutXattr, buf.data(), buf.size());
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
    return Errno(errno, "getxattr aquifer.layout of", path);
  }
}

Status SetLayoutXattr(const std::string& path, const std::string& value) {
  if (::setxattr(path.c_str(), kLayoutXattr, value.data(), value.size(), 0) != 0) {
    return Errno(errno, "setxattr aquifer.layout on", path);
  }
  return OkStatus();
}

}  // namespace aquifer::cli
