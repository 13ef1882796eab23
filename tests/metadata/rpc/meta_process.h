// Runs the real aquifer-meta binary for tests and benchmarks: own scratch dir, port 0, a port
// file polled with a deadline, and a kill in the destructor even when a test fails.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "meta.grpc.pb.h"

extern char** environ;

namespace aquifer::meta::testing {

namespace pb = aquifer::rpc;

inline std::string NewScratchDir(const std::string& tag) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() /
             ("aquifer-meta-" + tag + "-" + std::to_string(::getpid()) + "-" +
              std::to_string(rd() % 1000000));
  std::filesystem::create_directories(dir);
  return dir.string();
}

class MetaProcess {
 public:
  MetaProcess(std::string binary, std::string dir, std::vector<std::string> extra = {})
      : binary_(std::move(binary)), dir_(std::move(dir)), extra_(std::move(extra)) {}
  ~MetaProcess() { Kill(SIGKILL); }

  // Starts the server and waits (up to 20 s) until it wrote its port file. False on failure.
  bool Start() {
    std::string port_file = dir_ + "/port";
    std::filesystem::remove(port_file);
    std::vector<std::string> args = {binary_,        "--db",        dir_ + "/db", "--port-file",
                                     port_file,      "--log-level", "warn"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, binary_.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
      pid_ = 0;
      return false;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(port_file);
      if (in && std::getline(in, address_) && !address_.empty()) {
        channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
        stub_ = pb::MetaService::NewStub(channel_);
        return true;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling the port file
    }
    return false;
  }

  // Sends `sig` and reaps the process; returns its wait status (or -1 if none was running).
  int Kill(int sig) {
    if (pid_ == 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    stub_.reset();
    channel_.reset();
    return status;
  }

  // Sends `sig` (SIGSTOP, SIGCONT) without waiting.
  void Signal(int sig) {
    if (pid_ != 0) ::kill(pid_, sig);
  }

  pb::MetaService::Stub& stub() { return *stub_; }
  const std::string& address() const { return address_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string binary_, dir_;
  std::vector<std::string> extra_;
  pid_t pid_ = 0;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::MetaService::Stub> stub_;
};

// A client context with a deadline, for every test call.
inline std::unique_ptr<grpc::ClientContext> Ctx(int seconds = 10) {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return c;
}

// Registers `n` data servers in distinct failure domains.
inline bool RegisterServers(pb::MetaService::Stub& stub, int n) {
  for (int i = 0; i < n; ++i) {
    pb::RegisterServerRequest req;
    req.set_address("127.0.0.1:" + std::to_string(7100 + i));
    req.set_failure_domain("fd" + std::to_string(i));
    req.set_capacity_bytes(1ull << 40);
    req.set_used_bytes(1ull << 30);
    req.set_server_uuid("uuid-" + std::to_string(i));
    pb::RegisterServerResponse resp;
    if (!stub.RegisterServer(Ctx().get(), req, &resp).ok() || resp.status().code() != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace aquifer::meta::testing
