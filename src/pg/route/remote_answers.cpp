// A partition's answers copied out of libpq and raised (remote_answers.h).
#include <cstring>

#include "route/remote_answers.h"

extern "C" {
#include "utils/memutils.h"
}

namespace ratelimit_pg {
namespace {

// The statement being run, for the notices a partition sends with it.
const RemoteStatement* running = nullptr;

// A notice queued until libpq has returned.
struct QueuedNotice {
  RemoteMessage message;
  const char* database;
  QueuedNotice* next;
};
QueuedNotice* notices = nullptr;  // in the call's memory context
QueuedNotice** notices_end = &notices;

// palloc that does not raise: nullptr when out of memory. What copies a
// PGresult uses nothing else, so that nothing between libpq handing a
// result over and its PQclear can raise (a longjmp there would leak the
// result: libpq's memory is malloc'd, no memory context frees it).
void* AllocOrNull(size_t size) {
  return MemoryContextAllocExtended(CurrentMemoryContext, Max(size, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
}

char* CopyOrNull(const char* text) {
  size_t size = strlen(text) + 1;
  auto* copy = static_cast<char*>(AllocOrNull(size));
  if (copy != nullptr) memcpy(copy, text, size);
  return copy;
}

// Copies the fields of a partition's error or notice; false when out of
// memory.
bool CopyMessage(const PGresult* result, RemoteMessage* out) {
  const int codes[] = {PG_DIAG_SQLSTATE,       PG_DIAG_SEVERITY,     PG_DIAG_MESSAGE_PRIMARY,
                       PG_DIAG_MESSAGE_DETAIL, PG_DIAG_MESSAGE_HINT, PG_DIAG_CONTEXT};
  const char** fields[] = {&out->state,  &out->severity, &out->message,
                           &out->detail, &out->hint,     &out->context};
  for (int i = 0; i < 6; ++i) {
    const char* value = PQresultErrorField(result, codes[i]);
    *fields[i] = nullptr;
    if (value != nullptr && (*fields[i] = CopyOrNull(value)) == nullptr) return false;
  }
  if (out->state == nullptr || strlen(out->state) != 5) out->state = "XX000";
  return true;
}

// Copies a result's rows (binary values, nullptr for NULL, each followed
// by a zero byte as libpq leaves it) and its column types into four
// allocations; false when out of memory.
bool CopyRows(const PGresult* result, RemoteRows* out) {
  int rows = PQntuples(result);
  int columns = PQnfields(result);
  size_t cells = static_cast<size_t>(rows) * columns;
  size_t bytes = 0;
  for (int r = 0; r < rows; ++r)
    for (int col = 0; col < columns; ++col)
      if (!PQgetisnull(result, r, col)) bytes += static_cast<size_t>(PQgetlength(result, r, col)) + 1;
  auto** values = static_cast<char**>(AllocOrNull(sizeof(char*) * cells));
  auto* lengths = static_cast<int*>(AllocOrNull(sizeof(int) * cells));
  auto* types = static_cast<Oid*>(AllocOrNull(sizeof(Oid) * columns));
  auto* next = static_cast<char*>(AllocOrNull(bytes));
  if (values == nullptr || lengths == nullptr || types == nullptr || next == nullptr) return false;
  // A column the partition sent as text counts as no type: never read as binary.
  for (int col = 0; col < columns; ++col) types[col] = PQfformat(result, col) == 1 ? PQftype(result, col) : 0;
  for (int r = 0; r < rows; ++r)
    for (int col = 0; col < columns; ++col) {
      size_t cell = static_cast<size_t>(r) * columns + col;
      values[cell] = nullptr;
      lengths[cell] = 0;
      if (PQgetisnull(result, r, col)) continue;
      int length = PQgetlength(result, r, col);
      memcpy(next, PQgetvalue(result, r, col), static_cast<size_t>(length) + 1);
      values[cell] = next;
      lengths[cell] = length;
      next += static_cast<size_t>(length) + 1;
    }
  *out = RemoteRows{rows, columns, values, lengths, types};
  return true;
}

}  // namespace

bool TakeResult(PGresult* result, Answer* answer, bool* answered) {
  ExecStatusType status = PQresultStatus(result);
  bool copied = true;
  if (status == PGRES_FATAL_ERROR && !answer->failed) {
    answer->failed = true;
    copied = CopyMessage(result, &answer->error);
  } else if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
    *answered = true;
    copied = CopyRows(result, &answer->rows);
  }
  PQclear(result);
  return copied;
}

void RaiseRemoteMessage(const RemoteMessage& m, const RemoteStatement& statement, const char* database,
                        bool error) {
  int level = error ? ERROR : (strncmp(m.state, "00", 2) == 0 ? NOTICE : WARNING);
  ereport(level, (errcode(MAKE_SQLSTATE(m.state[0], m.state[1], m.state[2], m.state[3], m.state[4])),
                  errmsg("%s(%d): [%s] REMOTE %s: %s", statement.function_name, statement.function_args,
                         database, m.severity != nullptr ? m.severity : (error ? "ERROR" : "NOTICE"),
                         m.message != nullptr ? m.message : ""),
                  m.detail != nullptr ? errdetail("Remote detail: %s", m.detail) : 0,
                  m.hint != nullptr ? errhint("Remote hint: %s", m.hint) : 0,
                  m.context != nullptr ? errcontext("Remote context: %s", m.context) : 0));
}

void QueueNoticesOf(const RemoteStatement* statement) {
  notices = nullptr;
  notices_end = &notices;
  running = statement;
}

void QueueNotice(const PGresult* result, const char* database) {
  if (running == nullptr) return;
  auto* notice = static_cast<QueuedNotice*>(AllocOrNull(sizeof(QueuedNotice)));
  if (notice == nullptr || !CopyMessage(result, &notice->message)) return;
  notice->database = CopyOrNull(database);
  if (notice->database == nullptr) return;
  notice->next = nullptr;
  *notices_end = notice;
  notices_end = &notice->next;
}

void RaiseNotices() {
  while (notices != nullptr) {
    QueuedNotice* notice = notices;
    notices = notice->next;
    if (notices == nullptr) notices_end = &notices;
    RaiseRemoteMessage(notice->message, *running, notice->database, false);
  }
}

}  // namespace ratelimit_pg
