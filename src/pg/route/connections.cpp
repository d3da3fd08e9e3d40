// The router's connections to its partitions (connections.h).
#include <poll.h>

#include <cerrno>
#include <cstring>

#include "route/connections.h"

#include "route/remote_answers.h"

extern "C" {
#include "access/xact.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

#include "support/compat.h"

namespace ratelimit_pg {
namespace {

// One per connect string, allocated on its own (never moved: its address
// is libpq's notice receiver argument and a call's list of connections).
struct Connection {
  const char* connect_string;  // in the same allocation
  PGconn* conn;                // nullptr: closed
  // Waits for its answers: this backend's latch, the postmaster's death and
  // the socket, made once per connection (a set made per wait would cost
  // an epoll instance and three system calls more each time).
  WaitEventSet* wait_set;
  TimestampTz opened_at;
  // A statement was sent and its answer not read to the end (an error or a
  // cancel came in between): the connection cannot be used again.
  bool busy;
  uint64* prepared;  // the statements this connection has prepared (PreparedKey)
  int prepared_count;
  int prepared_size;
};

MemoryContext context = nullptr;
Connection** connections = nullptr;
int connection_count = 0;
int connection_size = 0;
bool hooks_registered = false;
// The cluster definition the connections were opened under.
uint64 connections_generation = 0;

void Close(Connection* c) {
  if (c->conn != nullptr) {
    if (c->busy) {
      // The partition may still be working on it (waiting for a lock):
      // cancel it, so its backend does not run on for nobody.
      if (PGcancel* cancel = PQgetCancel(c->conn)) {
        char message[256];
        PQcancel(cancel, message, sizeof(message));
        PQfreeCancel(cancel);
      }
    }
    PQfinish(c->conn);
  }
  if (c->wait_set != nullptr) FreeWaitEventSet(c->wait_set);
  c->wait_set = nullptr;
  c->conn = nullptr;
  c->busy = false;
  c->prepared_count = 0;
}

// A connection left in the middle of a statement (an error or a cancel
// came while its answer was awaited) is closed, its partition's statement
// cancelled: a routed call is never running while a (sub)transaction
// aborts, so every busy connection is one an error left.
void CloseBusy() {
  for (int i = 0; i < connection_count; ++i)
    if (connections[i]->busy) Close(connections[i]);
  QueueNoticesOf(nullptr);
}

void AtTransactionEnd(XactEvent event, void*) {
  if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT) CloseBusy();
}

// An exception block that caught the error aborts only its subtransaction.
void AtSubtransactionEnd(SubXactEvent event, SubTransactionId, SubTransactionId, void*) {
  if (event == SUBXACT_EVENT_ABORT_SUB) CloseBusy();
}

// At backend exit: every connection closed politely.
void AtExit(int, Datum) {
  for (int i = 0; i < connection_count; ++i) Close(connections[i]);
}

// After the cluster's definition changed, every connection goes, the
// partitions no longer in it too (they would otherwise stay open, idle,
// for the backend's life).
void ForgetStaleConnections(const RouterCluster& cluster) {
  if (cluster.generation == connections_generation) return;
  for (int i = 0; i < connection_count; ++i) Close(connections[i]);
  MemoryContextReset(context);
  connections = nullptr;
  connection_count = 0;
  connection_size = 0;
  connections_generation = cluster.generation;
}

void RegisterHooks() {
  if (hooks_registered) return;
  context = AllocSetContextCreate(TopMemoryContext, "ratelimit router connections", ALLOCSET_SMALL_SIZES);
  RegisterXactCallback(AtTransactionEnd, nullptr);
  RegisterSubXactCallback(AtSubtransactionEnd, nullptr);
  on_proc_exit(AtExit, 0);
  hooks_registered = true;
}

const char* DatabaseOf(const Connection& c) {
  const char* db = c.conn != nullptr ? PQdb(c.conn) : nullptr;
  return db != nullptr ? db : "?";
}

// libpq's message without its trailing newline, in palloc'd memory.
char* MessageOf(PGconn* conn) {
  char* message = pstrdup(conn != nullptr ? PQerrorMessage(conn) : "out of memory");
  size_t len = strlen(message);
  while (len > 0 && (message[len - 1] == '\n' || message[len - 1] == ' ')) message[--len] = '\0';
  return message;
}

// A lost connection (or one that could not be made): closed, and raised
// naming the function and the partition, as PL/Proxy does.
[[noreturn]] void RaiseLost(Connection* c, const RemoteStatement& statement, int partition, int sqlstate,
                            const char* what) {
  char* database = pstrdup(DatabaseOf(*c));
  char* message = MessageOf(c->conn);
  Close(c);
  ereport(ERROR, (errcode(sqlstate),
                  errmsg("%s(%d): [%s] %s: %s", statement.function_name, statement.function_args, database,
                         what, message),
                  errdetail("The partition is %d of server \"ratelimit\".", partition)));
  pg_unreachable();
}

// libpq's notice receiver (arg: the Connection): queues the notice.
void RelayNotice(void* arg, const PGresult* result) {
  QueueNotice(result, DatabaseOf(*static_cast<Connection*>(arg)));
}

// The connection of connect_string, added (closed) if there is none: the
// list grown first, then the connection and its string in one allocation,
// so that running out of memory leaves nothing half made.
Connection* ConnectionFor(const char* connect_string) {
  for (int i = 0; i < connection_count; ++i)
    if (strcmp(connections[i]->connect_string, connect_string) == 0) return connections[i];
  if (connection_count == connection_size) {
    int size = connection_size == 0 ? 4 : connection_size * 2;
    auto** grown = static_cast<Connection**>(MemoryContextAlloc(context, sizeof(Connection*) * size));
    if (connection_count > 0) memcpy(grown, connections, sizeof(Connection*) * connection_count);
    if (connections != nullptr) pfree(connections);
    connections = grown;
    connection_size = size;
  }
  size_t length = strlen(connect_string) + 1;
  auto* c = static_cast<Connection*>(MemoryContextAllocZero(context, sizeof(Connection) + length));
  char* copy = reinterpret_cast<char*>(c + 1);
  memcpy(copy, connect_string, length);
  c->connect_string = copy;
  connections[connection_count++] = c;
  return c;
}

// Milliseconds left before deadline (0 for none): -1 to wait forever.
long MillisecondsLeft(TimestampTz deadline) {
  if (deadline == 0) return -1;
  long left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
  return left;
}

// Waits until c's socket has what `events` asks for, or the deadline
// passes (false). A cancel or termination of this backend raises here (the
// connection stays busy, and is closed when the (sub)transaction aborts).
bool WaitFor(Connection* c, int events, TimestampTz deadline) {
  for (;;) {
    long timeout = MillisecondsLeft(deadline);
    if (deadline != 0 && timeout <= 0) return false;
    int happened;
    if (c->wait_set != nullptr && events == WL_SOCKET_READABLE) {
      WaitEvent event;
      happened = WaitEventSetWait(c->wait_set, timeout, &event, 1, PG_WAIT_EXTENSION) == 0 ? WL_TIMEOUT
                                                                                           : event.events;
    } else {
      happened = WaitLatchOrSocket(
          MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | events | (deadline != 0 ? WL_TIMEOUT : 0),
          PQsocket(c->conn), timeout, PG_WAIT_EXTENSION);
    }
    if (happened & WL_LATCH_SET) {
      ResetLatch(MyLatch);
      CHECK_FOR_INTERRUPTS();
    }
    if (happened & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE)) return true;
  }
}

TimestampTz DeadlineOf(const RouterCluster& cluster) {
  if (cluster.query_timeout <= 0) return 0;
  return TimestampTzPlusMilliseconds(GetCurrentTimestamp(), static_cast<int64>(cluster.query_timeout) * 1000);
}

[[noreturn]] void RaiseTimeout(Connection* c, const RemoteStatement& statement, int partition) {
  char* database = pstrdup(DatabaseOf(*c));
  c->busy = true;  // cancelled and closed
  Close(c);
  ereport(
      ERROR,
      (errcode(ERRCODE_QUERY_CANCELED),
       errmsg("%s(%d): [%s] query timeout", statement.function_name, statement.function_args, database),
       errdetail("The partition is %d of server \"ratelimit\", whose query_timeout has passed.", partition)));
  pg_unreachable();
}

// Opens c's connection (not open, or closed above).
void Open(Connection* c, const RouterCluster& cluster, const RemoteStatement& statement, int partition) {
  const char* keywords[] = {"dbname", "fallback_application_name", "client_encoding", nullptr};
  const char* values[] = {c->connect_string, "ratelimit_proxy", GetDatabaseEncodingName(), nullptr};
  c->conn = PQconnectStartParams(keywords, values, 1);
  c->busy = true;
  c->prepared_count = 0;
  c->opened_at = GetCurrentTimestamp();
  if (c->conn == nullptr || PQstatus(c->conn) == CONNECTION_BAD)
    RaiseLost(c, statement, partition, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
              "could not connect");
  TimestampTz deadline = DeadlineOf(cluster);
  PostgresPollingStatusType status = PGRES_POLLING_WRITING;
  while (status != PGRES_POLLING_OK) {
    if (status == PGRES_POLLING_FAILED)
      RaiseLost(c, statement, partition, ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
                "could not connect");
    if (!WaitFor(c, status == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE, deadline))
      RaiseTimeout(c, statement, partition);
    status = PQconnectPoll(c->conn);
  }
  PQsetNoticeReceiver(c->conn, RelayNotice, c);
  c->wait_set = compat::NewSessionWaitEventSet(3);
  AddWaitEventToSet(c->wait_set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, nullptr);
  AddWaitEventToSet(c->wait_set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, nullptr, nullptr);
  AddWaitEventToSet(c->wait_set, WL_SOCKET_READABLE, PQsocket(c->conn), nullptr, nullptr);
  c->busy = false;
}

// Whether an idle connection is still there: the partition sends nothing
// to an idle client unless it is closing the connection (a restart, a
// termination), so anything readable means it is gone.
bool StillOpen(Connection* c) {
  if (PQstatus(c->conn) != CONNECTION_OK) return false;
  pollfd fd{PQsocket(c->conn), POLLIN, 0};
  int ready;
  do {
    ready = poll(&fd, 1, 0);
  } while (ready < 0 && errno == EINTR);
  return ready == 0;
}

// c ready for a statement: opened, or reopened when it was lost, left busy,
// or older than connection_lifetime (as PL/Proxy's: seconds since it was
// opened, checked when it is about to be used).
void Ready(Connection* c, const RouterCluster& cluster, const RemoteStatement& statement, int partition) {
  if (c->conn != nullptr) {
    bool expired =
        cluster.connection_lifetime > 0 &&
        TimestampDifferenceExceeds(c->opened_at, GetCurrentTimestamp(), cluster.connection_lifetime * 1000);
    if (c->busy || expired || !StillOpen(c)) Close(c);
  }
  if (c->conn == nullptr) Open(c, cluster, statement, partition);
}

// Out of memory while an answer was read: the connection (in the middle of
// its statement) closed, its partition's statement cancelled.
[[noreturn]] void RaiseOutOfMemory(Connection* c, const RemoteStatement& statement, int partition) {
  c->busy = true;
  Close(c);
  ereport(ERROR,
          (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory"),
           errdetail("The answer of partition %d of server \"ratelimit\" to %s(%d) could not be copied.",
                     partition, statement.function_name, statement.function_args)));
  pg_unreachable();
}

// Reads every result of what was sent on c, to the end: the connection is
// then idle and stays, whatever the partition answered. A lost connection
// is raised at once (and closed). Each result is copied and freed as soon
// as libpq hands it over, so no PGresult is held while anything can raise
// (a wait, a notice, a cancel, an error of another partition).
Answer ReadAnswer(Connection* c, const RouterCluster& cluster, const RemoteStatement& statement,
                  int partition, TimestampTz deadline) {
  Answer out{};
  bool answered = false;
  for (;;) {
    while (PQisBusy(c->conn)) {
      RaiseNotices();
      if (!WaitFor(c, WL_SOCKET_READABLE, deadline)) RaiseTimeout(c, statement, partition);
      if (!PQconsumeInput(c->conn)) break;
    }
    PGresult* result = PQgetResult(c->conn);
    if (result == nullptr) break;
    if (!TakeResult(result, &out, &answered)) RaiseOutOfMemory(c, statement, partition);
    RaiseNotices();
    if (PQstatus(c->conn) == CONNECTION_BAD) break;
  }
  RaiseNotices();
  if (PQstatus(c->conn) == CONNECTION_BAD)
    RaiseLost(c, statement, partition, ERRCODE_CONNECTION_FAILURE, "connection lost");
  if (!out.failed && !answered) RaiseLost(c, statement, partition, ERRCODE_PROTOCOL_VIOLATION, "no answer");
  c->busy = false;
  out.database = pstrdup(DatabaseOf(*c));
  return out;
}

// The prepared statement's name: the router's function and its statement.
void StatementName(const RemoteStatement& statement, char* out, size_t size) {
  snprintf(out, size, "ratelimit_proxy_%u_%08x", statement.function, statement.sql_hash);
}

uint64 PreparedKey(const RemoteStatement& statement) {
  return (static_cast<uint64>(statement.function) << 32) | statement.sql_hash;
}

bool Prepared(const Connection& c, uint64 key) {
  for (int i = 0; i < c.prepared_count; ++i)
    if (c.prepared[i] == key) return true;
  return false;
}

// Room for one more prepared statement, made before it is prepared: a
// statement prepared on the partition is always remembered (preparing it
// again would fail there).
void ReservePrepared(Connection* c) {
  if (c->prepared_count == c->prepared_size) {
    int size = c->prepared_size == 0 ? 8 : c->prepared_size * 2;
    auto* grown = static_cast<uint64*>(MemoryContextAlloc(context, sizeof(uint64) * size));
    if (c->prepared_count > 0) memcpy(grown, c->prepared, sizeof(uint64) * c->prepared_count);
    if (c->prepared != nullptr) pfree(c->prepared);
    c->prepared = grown;
    c->prepared_size = size;
  }
}

// Prepares the statement on c if it has not (one round trip, once).
void Prepare(Connection* c, const RouterCluster& cluster, const RemoteStatement& statement, int partition) {
  if (Prepared(*c, PreparedKey(statement))) return;
  char name[64];
  StatementName(statement, name, sizeof(name));
  ReservePrepared(c);
  c->busy = true;
  if (!PQsendPrepare(c->conn, name, statement.sql, 0, nullptr))
    RaiseLost(c, statement, partition, ERRCODE_CONNECTION_FAILURE, "connection lost");
  Answer answer = ReadAnswer(c, cluster, statement, partition, DeadlineOf(cluster));
  if (answer.failed) RaiseRemoteMessage(answer.error, statement, answer.database, true);
  c->prepared[c->prepared_count++] = PreparedKey(statement);
}

void Send(Connection* c, const RemoteStatement& statement, int partition) {
  char name[64];
  StatementName(statement, name, sizeof(name));
  c->busy = true;
  if (!PQsendQueryPrepared(c->conn, name, statement.params, statement.values, statement.lengths,
                           statement.formats, 1))
    RaiseLost(c, statement, partition, ERRCODE_CONNECTION_FAILURE, "connection lost");
}

// An answer must have the statement's columns, of its types (built-in
// types: the same OIDs on every server), in binary: 42804 naming the
// partition, before any value is read.
void RequireColumns(const Answer& answer, const RemoteStatement& statement) {
  const RemoteRows& rows = answer.rows;
  if (rows.columns != statement.columns)
    ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                    errmsg("%s(%d): [%s] the partition answered %d columns, not %d", statement.function_name,
                           statement.function_args, answer.database, rows.columns, statement.columns),
                    errhint("Update the partitions' ratelimit to the router's version.")));
  for (int col = 0; col < rows.columns; ++col) {
    if (rows.types[col] == statement.column_types[col]) continue;
    ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                    errmsg("%s(%d): [%s] the partition answered column %d as type %u, not %u (%s)",
                           statement.function_name, statement.function_args, answer.database, col + 1,
                           rows.types[col], statement.column_types[col],
                           format_type_be(statement.column_types[col])),
                    errhint("Update the partitions' ratelimit to the router's version.")));
  }
}

}  // namespace

void RunOnPartitions(const RouterCluster& cluster, const int* targets, int count,
                     const RemoteStatement& statement, RemoteRows* out) {
  RegisterHooks();
  ForgetStaleConnections(cluster);
  QueueNoticesOf(&statement);
  auto** used = static_cast<Connection**>(palloc(sizeof(Connection*) * count));
  for (int i = 0; i < count; ++i) {
    Connection* c = ConnectionFor(cluster.connect_strings[targets[i]]);
    used[i] = c;
    Ready(c, cluster, statement, targets[i]);
    Prepare(c, cluster, statement, targets[i]);
  }
  // Sent to every partition before any answer is read: they run at once;
  // one after the other when two partitions share a connect string.
  bool shared = false;
  for (int i = 0; i < count; ++i)
    for (int j = 0; j < i; ++j) shared = shared || used[i] == used[j];
  TimestampTz deadline = DeadlineOf(cluster);
  auto* answers = static_cast<Answer*>(palloc(sizeof(Answer) * count));
  for (int i = 0; i < count; ++i) {
    Send(used[i], statement, targets[i]);
    if (shared) answers[i] = ReadAnswer(used[i], cluster, statement, targets[i], deadline);
  }
  if (!shared)
    for (int i = 0; i < count; ++i)
      answers[i] = ReadAnswer(used[i], cluster, statement, targets[i], deadline);
  // Every answer read (every connection idle again) before an error is
  // raised: the first partition's, in partition order.
  for (int i = 0; i < count; ++i)
    if (answers[i].failed) RaiseRemoteMessage(answers[i].error, statement, answers[i].database, true);
  for (int i = 0; i < count; ++i) RequireColumns(answers[i], statement);
  for (int i = 0; i < count; ++i) out[i] = answers[i].rows;
  QueueNoticesOf(nullptr);
}

}  // namespace ratelimit_pg
