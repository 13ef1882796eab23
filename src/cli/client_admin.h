// `aquifer client add|list|remove`: client credentials and the registry of exports
// (common/client_credential.h, docs/operations.md "Client credentials").
//
// The registry is a file on the metadata server's host (ROOT/clients for a local cluster,
// aquifer-meta --clients for others), re-read by aquifer-meta within a few seconds of a change;
// these commands edit it under an flock(2) on REGISTRY.lock and replace it with rename(2), so
// the server never reads half a file. Making a credential needs the cluster key (the client's key
// is derived from it). Blocking file I/O; not thread-safe against itself beyond the lock.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "aquifer/status.h"
#include "common/client_credential.h"

namespace aquifer::cli {

struct ClientAddRequest {
  std::string name;
  std::string path = "/";           // exported subtree (--path)
  bool read_only = false;           // --read-only
  bool root_squash = false;         // --root-squash
  std::vector<std::string> allow;   // --allow CIDR, repeatable; empty = any address
  std::string credential_file;      // where the credential goes (0600, never overwritten)
};

// Adds `req.name` to the registry at `registry` with a fresh random id and writes its credential
// (derived from `cluster_key`). Errors: kInvalidArgument (bad name, path or network),
// kAlreadyExists (the name is registered, or the credential file exists), kInternal for I/O.
Status AddClient(const std::string& registry, const ClusterKey& cluster_key,
                 const ClientAddRequest& req, std::ostream& out);
// Prints the registry: one line per client (name, access, squash, networks, path), escaped.
Status ListClients(const std::string& registry, std::ostream& out);
// Removes `name` from the registry: its mounts fail within seconds (aquifer-meta re-reads it),
// and its credential file is useless from then on, even if the name is added again (new id).
// Errors: kNotFound when it is not registered.
Status RemoveClient(const std::string& registry, const std::string& name, std::ostream& out);

}  // namespace aquifer::cli
