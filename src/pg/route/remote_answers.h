// What a partition sends back (remote_answers.cpp): its rows, its error
// and its notices, copied out of libpq by code that cannot raise (libpq's
// memory is malloc'd, which no memory context frees: a longjmp between
// libpq handing a result over and its PQclear would leak it), then raised
// as PL/Proxy raises them. For connections.cpp.
#pragma once

#include "route/remote_statement.h"

extern "C" {
#include "libpq-fe.h"
}

namespace ratelimit_pg {

// A partition's error or notice, its fields copied out of libpq's result
// (so the result can be freed before anything is raised).
struct RemoteMessage {
  const char* state;
  const char* severity;
  const char* message;
  const char* detail;
  const char* hint;
  const char* context;
};

// What a partition answered: its rows, or its error, copied out of libpq.
struct Answer {
  bool failed;
  RemoteRows rows;      // when not failed
  RemoteMessage error;  // when failed
  const char* database;
};

// Copies what a result carries into *answer (its first error; its last
// rows, *answered then set) and frees it, whatever happens: false when
// out of memory. Nothing here can raise.
bool TakeResult(PGresult* result, Answer* answer, bool* answered);

// Passes a partition's error or notice through as PL/Proxy does.
void RaiseRemoteMessage(const RemoteMessage& m, const RemoteStatement& statement, const char* database,
                        bool error);

// The notices partitions send during a statement are queued and raised
// once libpq has returned (RaiseNotices): a notice raised inside libpq's
// receiver could longjmp out of libpq (a cancel is checked for by every
// ereport) and leak the result libpq made for it.

// The statement whose notices are queued from now on, the queue emptied
// (nullptr: none; notices that come then are dropped).
void QueueNoticesOf(const RemoteStatement* statement);
// Queues a notice of the partition `database` (dropped when out of memory).
// Nothing here can raise.
void QueueNotice(const PGresult* result, const char* database);
// Raises the queued notices, in the order they came (no PGresult is held).
void RaiseNotices();

}  // namespace ratelimit_pg
