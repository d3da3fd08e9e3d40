// The router's cluster: the partitions of PL/Proxy's SQL/MED cluster
// "ratelimit" (CREATE SERVER ratelimit FOREIGN DATA WRAPPER plproxy
// OPTIONS (p0 '...', p1 '...')) and the connect string of each for the
// current user, read as PL/Proxy reads them (cluster.c): options pN
// numbered from 0, a power of 2 of them (PL/Proxy's partition_N names and
// modular_mapping are refused: the extension's SQL routes by the mask), the
// user mapping's user and password (or user=<current user>) added to a
// connect string that names no user, USAGE on the server required.
//
// Kept per backend until the server, a user mapping or the wrapper changes
// (syscache callbacks), or the current user does.
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

struct RouterCluster {
  const char* name;  // "ratelimit": the server's name, in messages
  int partitions;
  int connection_lifetime;  // seconds; 0: forever
  int query_timeout;        // seconds; 0: none
  // Each partition's full connect string; equal strings share a connection.
  const char* const* connect_strings;
  // Bumped whenever the catalogs changed (not when only the current user
  // did): connections made before are closed before their next use.
  uint64 generation;
};

// The cluster as the current user reaches it; raises when there is no
// server "ratelimit", no user mapping, no USAGE or no valid partition list.
const RouterCluster& CurrentCluster();

// The partition holding hash, as PL/Proxy's RUN ON hash picks it.
int PartitionOfHash(const RouterCluster& cluster, int32 hash);

}  // namespace ratelimit_pg
