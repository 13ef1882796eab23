#include "common/config_file.h"

#include <CLI/CLI.hpp>
#include <toml++/toml.h>

#include <limits>

namespace aquifer {

void ConfigFileOptions::Add(const std::string& flag, std::string* field,
                            const std::string& help) {
  app_.add_option(flag, *field, help);
  Register(flag, Kind::kString, field);
}

void ConfigFileOptions::Add(const std::string& flag, uint32_t* field, const std::string& help) {
  app_.add_option(flag, *field, help);
  Register(flag, Kind::kUint32, field);
}

void ConfigFileOptions::Add(const std::string& flag, uint64_t* field, const std::string& help) {
  app_.add_option(flag, *field, help);
  Register(flag, Kind::kUint64, field);
}

void ConfigFileOptions::Add(const std::string& flag, bool* field, const std::string& help) {
  app_.add_flag(flag, *field, help);
  Register(flag, Kind::kBool, field);
}

void ConfigFileOptions::AddConfigFileFlag(const std::string& flag, std::string* path,
                                          const std::string& help) {
  app_.add_option(flag, *path, help);
  config_path_ = path;
}

Status ConfigFileOptions::Parse(int argc, char** argv, std::string* help_out) {
  help_out->clear();
  try {
    app_.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    *help_out = app_.help();
    return OkStatus();
  } catch (const CLI::CallForVersion& e) {
    *help_out = std::string(e.what()) + "\n";
    return OkStatus();
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(std::string("bad command line: ") + e.what());
  }
  if (config_path_ != nullptr && !config_path_->empty()) return ApplyFile(*config_path_);
  return OkStatus();
}

void ConfigFileOptions::Register(const std::string& flag, Kind kind, void* field) {
  const size_t dashes = flag.find_first_not_of('-');
  keys_.push_back({flag.substr(dashes == std::string::npos ? flag.size() : dashes), kind, field});
}

namespace {

// Sets *field from `node` when the TOML type and range fit. Returns false (field unchanged)
// otherwise.
bool SetString(const toml::node& node, std::string* field) {
  auto v = node.value<std::string>();
  if (!v) return false;
  *field = *v;
  return true;
}

bool SetBool(const toml::node& node, bool* field) {
  auto v = node.value_exact<bool>();
  if (!v) return false;
  *field = *v;
  return true;
}

template <class Unsigned>
bool SetUnsigned(const toml::node& node, Unsigned* field) {
  auto v = node.value<int64_t>();
  if (!v || *v < 0 || static_cast<uint64_t>(*v) > std::numeric_limits<Unsigned>::max()) {
    return false;
  }
  *field = static_cast<Unsigned>(*v);
  return true;
}

}  // namespace

Status ConfigFileOptions::ApplyFile(const std::string& path) const {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return InvalidArgument("config " + path + ": " + std::string(e.description()));
  }
  for (auto&& [toml_key, node] : table) {
    std::string name(toml_key.str());
    for (char& c : name) {
      if (c == '_') c = '-';
    }
    const Key* key = nullptr;
    for (const Key& k : keys_) {
      if (k.name == name) key = &k;
    }
    if (key == nullptr) return InvalidArgument("config " + path + ": unknown key " + name);
    if (app_.count("--" + name) > 0) continue;  // the command line wins
    bool ok = false;
    switch (key->kind) {
      case Kind::kString: ok = SetString(node, static_cast<std::string*>(key->field)); break;
      case Kind::kUint32: ok = SetUnsigned(node, static_cast<uint32_t*>(key->field)); break;
      case Kind::kUint64: ok = SetUnsigned(node, static_cast<uint64_t*>(key->field)); break;
      case Kind::kBool: ok = SetBool(node, static_cast<bool*>(key->field)); break;
    }
    if (!ok) return InvalidArgument("config " + path + ": bad value for " + name);
  }
  return OkStatus();
}

}  // namespace aquifer
