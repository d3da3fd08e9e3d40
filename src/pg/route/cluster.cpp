// The router's cluster (cluster.h), read from the SQL/MED catalogs.
#include <cstdlib>
#include <initializer_list>
#include <cstring>

#include "route/cluster.h"

extern "C" {
#include "catalog/pg_foreign_server.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
}

#include "support/compat.h"

namespace ratelimit_pg {
namespace {

constexpr const char* kClusterName = "ratelimit";

RouterCluster cluster{};
bool valid = false;
bool changed = true;  // the catalogs changed since the last read
bool callbacks_registered = false;
Oid read_for_user = InvalidOid;
MemoryContext cluster_context = nullptr;

// Invalidations seen: one that arrives while Read reads the catalogs
// (each lookup can deliver them) leaves the definition it made invalid.
uint64 invalidations = 0;

void Invalidate(Datum, int, uint32) {
  valid = false;
  changed = true;
  ++invalidations;
}

void RegisterCallbacks() {
  if (callbacks_registered) return;
  CacheRegisterSyscacheCallback(FOREIGNSERVEROID, Invalidate, 0);
  CacheRegisterSyscacheCallback(USERMAPPINGOID, Invalidate, 0);
  CacheRegisterSyscacheCallback(FOREIGNDATAWRAPPEROID, Invalidate, 0);
  callbacks_registered = true;
}

// A partition option's number: pN (`tag` "p"), or PL/Proxy's other name
// partition_N (`tag` "partition_").
bool PartitionNumber(const char* option, const char* tag, int* number) {
  size_t len = strlen(tag);
  if (strncmp(option, tag, len) != 0 || option[len] == '\0') return false;
  char* end = nullptr;
  unsigned long n = strtoul(option + len, &end, 10);
  if (*end != '\0' || n >= 65536) return false;
  *number = static_cast<int>(n);
  return true;
}

// An integer cluster option (PL/Proxy's validator allows only digits).
int IntegerOption(const DefElem* option) { return atoi(defGetString(const_cast<DefElem*>(option))); }

// libpq's quoting of a connect string value: ' and \ escaped, in quotes.
void AppendOption(StringInfo out, const char* name, const char* value) {
  appendStringInfo(out, " %s='", name);
  for (; *value != '\0'; ++value) {
    if (*value == '\'' || *value == '\\') appendStringInfoChar(out, '\\');
    appendStringInfoChar(out, *value);
  }
  appendStringInfoChar(out, '\'');
}

// The partition of a limit is hash & (N - 1) for the router's C calls and
// for the extension's SQL (ratelimit_partitions() counts the pN options,
// ratelimit_partition and ratelimit_limit_all's spanning check use the
// mask). PL/Proxy's other forms (partition_N names, modular_mapping's
// abs(hash) % N) would route some calls where the SQL says they are not:
// a limit held on two partitions, each granting its capacity. Refused.
[[noreturn]] void RaiseUnsupportedCluster(const char* option) {
  ereport(ERROR,
          (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
           errmsg("ratelimit_proxy: server \"%s\" has option \"%s\", which ratelimit_proxy does not support",
                  kClusterName, option),
           errdetail("ratelimit_proxy routes a limit to partition hash & (N - 1) of options p0 .. pN-1, "
                     "in its SQL functions as in its C calls."),
           errhint("Name the partitions p0, p1, ... (a power of 2 of them), without modular_mapping.")));
}

[[noreturn]] void RaiseBadCluster(const char* why) {
  ereport(ERROR,
          (errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
           errmsg("ratelimit_proxy: the partitions of server \"%s\" are not valid: %s", kClusterName, why),
           errhint("Name them p0, p1, ... (a power of 2 of them), as PL/Proxy's CLUSTER needs.")));
}

// The user mapping's part of every connect string that names no user:
// its options, and user=<current user> when it gives no user.
char* UserOptions(Oid server) {
  UserMapping* mapping = GetUserMapping(GetUserId(), server);
  StringInfoData out;
  initStringInfo(&out);
  bool has_user = false;
  ListCell* cell;
  foreach (cell, mapping->options) {
    auto* option = static_cast<DefElem*>(lfirst(cell));
    if (strcmp(option->defname, "user") == 0) has_user = true;
    AppendOption(&out, option->defname, defGetString(option));
  }
  if (!has_user) AppendOption(&out, "user", GetUserNameFromId(GetUserId(), false));
  return out.data;
}

void Read() {
  valid = false;
  uint64 invalidations_before = invalidations;
  ForeignServer* server = GetForeignServerByName(kClusterName, true);
  if (server == nullptr)
    ereport(ERROR,
            (errcode(ERRCODE_UNDEFINED_OBJECT),
             errmsg("ratelimit_proxy: there is no server \"%s\"", kClusterName),
             errhint("Define the partitions: CREATE SERVER %s FOREIGN DATA WRAPPER plproxy OPTIONS (p0 "
                     "'dbname=... host=...', ...), and a user mapping for it.",
                     kClusterName)));
  AclResult acl = compat::ForeignServerAclCheck(server->serverid, GetUserId(), ACL_USAGE);
  if (acl != ACLCHECK_OK) aclcheck_error(acl, OBJECT_FOREIGN_SERVER, server->servername);

  if (cluster_context == nullptr)
    cluster_context =
        AllocSetContextCreate(TopMemoryContext, "ratelimit router cluster", ALLOCSET_SMALL_SIZES);
  // The old definition (and what a failed read left) goes: nothing points
  // into it while valid is false.
  MemoryContextReset(cluster_context);
  MemoryContext caller = MemoryContextSwitchTo(cluster_context);
  char* user_options = UserOptions(server->serverid);
  int count = list_length(server->options);
  auto** strings = static_cast<char**>(palloc0(sizeof(char*) * (count + 1)));
  int partitions = 0;
  RouterCluster next{};
  ListCell* cell;
  foreach (cell, server->options) {
    auto* option = static_cast<DefElem*>(lfirst(cell));
    int number;
    if (PartitionNumber(option->defname, "partition_", &number)) {
      RaiseUnsupportedCluster(option->defname);
    } else if (PartitionNumber(option->defname, "p", &number)) {
      if (number >= count || strings[number] != nullptr) RaiseBadCluster("a number is missing or repeated");
      const char* given = defGetString(option);
      StringInfoData connect;
      initStringInfo(&connect);
      appendStringInfoString(&connect, given);
      if (strstr(given, "user=") == nullptr) appendStringInfoString(&connect, user_options);
      strings[number] = connect.data;
      ++partitions;
    } else if (pg_strcasecmp(option->defname, "modular_mapping") == 0) {
      if (IntegerOption(option) != 0) RaiseUnsupportedCluster(option->defname);
    } else if (pg_strcasecmp(option->defname, "connection_lifetime") == 0) {
      next.connection_lifetime = IntegerOption(option);
    } else if (pg_strcasecmp(option->defname, "query_timeout") == 0) {
      next.query_timeout = IntegerOption(option);
    }
  }
  for (int i = 0; i < partitions; ++i)
    if (strings[i] == nullptr) RaiseBadCluster("a number is missing or repeated");
  if (partitions == 0) RaiseBadCluster("there are none");
  if ((partitions & (partitions - 1)) != 0) RaiseBadCluster("their number is not a power of 2");
  MemoryContextSwitchTo(caller);

  next.name = kClusterName;
  next.partitions = partitions;
  next.connect_strings = strings;
  // Another user's read keeps the connections (theirs name another user).
  next.generation = cluster.generation + (changed ? 1 : 0);
  cluster = next;
  read_for_user = GetUserId();
  // A change seen during the read: this call uses what was read (as a call
  // begun before the change would), the next one reads again, and opens
  // new connections.
  valid = invalidations == invalidations_before;
  changed = !valid;
}

}  // namespace

const RouterCluster& CurrentCluster() {
  RegisterCallbacks();
  if (!valid || read_for_user != GetUserId()) Read();
  return cluster;
}

int PartitionOfHash(const RouterCluster& c, int32 hash) {
  return static_cast<int>(static_cast<uint32>(hash) & static_cast<uint32>(c.partitions - 1));
}

}  // namespace ratelimit_pg
