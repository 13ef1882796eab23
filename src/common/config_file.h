// A daemon's options as flags and as keys of a TOML config file, registered once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aquifer/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace aquifer {

// Registers each option twice from one line: as the flag `--name` of a CLI11 app, and as the
// key `name` of a TOML config file (also spelled with '_' for '-': port_file == port-file);
// both write the same field. Use: Add() every option and AddConfigFileFlag() once, then
// Parse(): it parses the command line, then applies the file the config flag named, so values
// given as flags win over the file's. The app (not owned) must outlive this; the fields are the
// caller's and must outlive it too. Not thread-safe; meant for a daemon's start-up.
//
//   CLI::App app("aquifer-x: what it is");
//   ConfigFileOptions options(app);
//   options.Add("--listen", &o.listen, "HOST:PORT to serve on");
//   options.AddConfigFileFlag("--config", &o.config, "TOML file with the same keys as the flags");
//   AQ_RETURN_IF_ERROR(options.Parse(argc, argv, help_out));
//   if (!help_out->empty()) return Options{};  // --help or --version: main prints it, exits
class ConfigFileOptions {
 public:
  explicit ConfigFileOptions(CLI::App& app) : app_(app) {}
  ConfigFileOptions(const ConfigFileOptions&) = delete;
  ConfigFileOptions& operator=(const ConfigFileOptions&) = delete;

  // Adds the flag `flag` ("--name") with `help` to the app (CLI11 converts and checks the
  // flag's value) and the config key "name" for `field`. In the file a string field takes a
  // TOML string; a uint32_t field an integer in 0..UINT32_MAX; a uint64_t field an integer
  // >= 0 (TOML integers are signed 64-bit).
  void Add(const std::string& flag, std::string* field, const std::string& help);
  void Add(const std::string& flag, uint32_t* field, const std::string& help);
  void Add(const std::string& flag, uint64_t* field, const std::string& help);
  // A switch: the flag takes no value (given = true); the file's key a TOML boolean.
  void Add(const std::string& flag, bool* field, const std::string& help);

  // Adds the flag `flag` ("--config") whose value, a path, names the TOML file Parse() applies
  // ("" = none). It is not a key of the file. Call at most once.
  void AddConfigFileFlag(const std::string& flag, std::string* path, const std::string& help);

  // Parses the command line (`argc` entries of `argv`, argv[0] the program's name) with the app,
  // then applies the config file when the config flag's path is non-empty (ApplyFile). Clears
  // *help_out first; on --help it puts the help text there, on --version (when the app has a
  // version flag) the version line ending in '\n', applies no file and returns OK.
  // Errors: kInvalidArgument "bad command line: ..." for an unknown flag or a flag value CLI11
  // cannot convert to its field; else ApplyFile's errors.
  Status Parse(int argc, char** argv, std::string* help_out);

  // Reads the TOML file at `path` and, for each top-level key in the file's order, sets the
  // option's field unless its flag was given on the command line (call after parsing it).
  // Errors (kInvalidArgument, message "config <path>: ..."): the file cannot be read or is not
  // valid TOML (toml++'s description); a key no Add() registered ("unknown key <name>"); a
  // value of the wrong TOML type or out of the field's range ("bad value for <name>"). Keys
  // before the bad one have been applied when an error is returned; the caller should stop.
  Status ApplyFile(const std::string& path) const;

 private:
  enum class Kind : uint8_t { kString, kUint32, kUint64, kBool };
  struct Key {
    std::string name;  // without the leading "--"
    Kind kind;
    void* field;  // std::string*, uint32_t* or uint64_t*, by kind
  };
  void Register(const std::string& flag, Kind kind, void* field);

  CLI::App& app_;
  std::vector<Key> keys_;
  std::string* config_path_ = nullptr;  // the config flag's field, once added
};

}  // namespace aquifer
