// The storage seam: the one interface through which the decision code
// (consume*.cpp), the functions and config changes reach a limit's stored
// state. A storage keeps one row per (name, key, shard); its steps find,
// lock, read, write, insert and delete rows, and scan them for
// ratelimit_status and ratelimit_cleanup. Each storage (a folder under
// storage/) is one implementation; a new storage is one more Storage value, listed in storage.cpp (storage.h:
// which storage a call's limit lives in), plus its tests. This header only
// defines the interface (no module behind it).
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

// Where the version of a row that was read is, in its storage's own terms:
// opaque bytes only the storage that read it interprets (all zero: none).
struct RowVersion {
  alignas(8) unsigned char bytes[8];
};

// A row as a step read it.
struct StoredState {
  LimitState state;
  // Which kind wrote it (when state.exists; row_codec.h reads its tag).
  ratelimit::RowKind kind;
  bool has_idle_at;    // idle_at is known (not NULL, and the storage keeps it)
  Micros idle_at;      // from then on the row answers as no row (see StateForKind)
  bool busy;           // the row exists but another transaction holds it (kLockSkipLocked)
  RowVersion version;  // valid when state.exists
  // The window period the row was written under, where the storage keeps
  // it (0: not kept; the table's rows are carried over by a config change
  // itself). A row off the call's grid is realigned as a change would (LiveFor).
  Micros period;
  // Which life of the row this is, where the storage's writes are not undone
  // by a rollback (memory): a new one whenever the row is made again (after
  // a reset, a sweep), so a rollback's refund for an earlier life is
  // dropped. 0 where the storage has none.
  uint64 incarnation;
};

// A row to write: the state, whether prev is kept (else NULL), with the
// kind's tag or figure in next.prev (row_codec.h's TaggedRow), and when the
// row becomes the same as no row.
struct RowWrite {
  LimitState next;
  bool keep_prev;
  Micros idle_at;
  Micros period;  // the window period it is written under (0: a kind without windows)
};

// How a step reads a row: without a row lock (kUnlockedForWrite: the
// caller means to write it next, so the storage may take the lock its
// write takes at once, as an UPDATE locks its table before it reads), or
// locked as SELECT ... FOR UPDATE [SKIP LOCKED] locks it.
enum class ReadMode { kUnlocked, kUnlockedForWrite, kLock, kLockSkipLocked };

// A stored row with its identity, as a status scan hands it over and a
// config change locks it.
struct KeyedRow {
  LimitId id;
  StoredState stored;
};
using StatusRowSink = void (*)(const KeyedRow& row, void* context);

// What a storage undone by refunds (modify) runs on one row under its own
// short lock: decides from `stored` (no row: state.exists false) and
// returns whether to write *out. It must not ereport, allocate or wait: only
// the core runs there.
using ModifyStep = bool (*)(const StoredState& stored, void* context, RowWrite* out);

// What a new row of a storage undone by refunds may take: the share of
// rows made under callers' inline configs (inline_share), and at most
// name_rows rows of its name (0: no such bound).
struct NewRowRoom {
  bool inline_share;
  int64 name_rows;
};

enum class ModifyResult {
  kDone,           // the step ran (and its write, if any, was stored)
  kNoRoom,         // the row is new and the storage is full of live rows: nothing ran
  kNoRoomForName,  // the row is new and its name has name_rows live rows: nothing ran
  // The row is new and needs a part of the storage that is full of live
  // rows (of its share): nothing ran. Which part is the storage's own to
  // say: values from kNoRoomInPart on are its own, read only by its
  // raise_no_room.
  kNoRoomInPart,
};

// How the caller's rollback undoes a storage's grant, and so how a grant is
// written.
enum class Undo {
  // By the transaction: rows are locked (as SELECT ... FOR UPDATE) to the
  // transaction's end and written as table rows are, and PostgreSQL's
  // rollback undoes the write. Such a storage offers the locking steps,
  // read_all_shards to lock_rows_for_change.
  kByTransaction,
  // By a refund: a grant is written at once in one short step (modify),
  // seen by every session, and the decision code gives a rolled-back grant
  // back (pending_grants.h), unless the config says "on_rollback": "keep".
  kByRefund,
};

// A storage: its properties (what differs between storages, asked by the
// decision code, the functions and config changes instead of which storage
// it is) and its steps. Each step takes whatever lock it needs first and
// looks after (lock, then look); locks on rows are held to the end of the
// (sub)transaction, as SELECT ... FOR UPDATE's. read, delete_limit,
// delete_idle and scan_status are every storage's; the others are those of
// its Undo. Written with designated initializers: a step not named is
// nullptr.
struct Storage {
  const char* name = nullptr;  // the config's "storage" value, and ratelimit_status' storage column
  Undo undo = Undo::kByTransaction;
  // Keeps a limit's "shards" rows; false: one row per limit, decided
  // exactly (a config's shards are accepted and unused).
  bool keeps_shards = false;
  // Usable in a read-only transaction (and on a hot standby); false: its
  // writes raise 25006 there.
  bool usable_read_only = false;
  // A change of config carries its rows over at once, locked with
  // lock_rows_for_change; false: they are read under the config in force at
  // their next call (a row of another kind as no row), not under one a
  // rollback could take back.
  bool carries_rows_on_change = false;
  // Takes a config's "memoryKeys": a bound on the rows of one name.
  bool bounds_name_rows = false;
  // A call holds ACCESS SHARE on the definition and override tables to its
  // transaction's end, as the SQL statements its steps stand for would;
  // false: it takes no lock on them, and sees their changes through the
  // invalidations it accepts (config_cache.cpp's ResolveConfig says why
  // that is as fresh).
  bool locks_config_tables = false;

  StoredState (*read)(const LimitId& id, ReadMode mode) = nullptr;
  // Fills out[0..shards) with shard i at index i (state.exists=false: no
  // row); lock: each existing row locked. Returns how many exist.
  int (*read_all_shards)(const LimitId& id, bool lock, int shards, StoredState* out) = nullptr;
  // Inserts the row unless it exists (INSERT ... ON CONFLICT DO NOTHING);
  // false if it existed.
  bool (*insert)(const LimitId& id, const RowWrite& row) = nullptr;
  // Locks the row, creating it first in the state `initial` (which must
  // answer like no row at all) if there is none. wait=false: a row another
  // transaction holds, or is creating, is not waited for and false
  // returned. With wait, false means the row vanished under the lock
  // (decide again). announce: the creation takes a lock held to the
  // transaction's end, which tells skip-locked callers the row is in flight
  // (shard rows).
  bool (*lock_or_create)(const LimitId& id, const RowWrite& initial, bool wait, bool announce,
                         StoredState* out) = nullptr;
  // Writes the row version that was read (expected) if it is still the
  // newest, without waiting for a lock; false if another transaction
  // changed or deleted it meanwhile, or the storage cannot tell.
  bool (*update_if_unchanged)(const LimitId& id, const StoredState& expected, const RowWrite& row) = nullptr;
  // Writes a row this transaction has locked; version (may be nullptr) is
  // where the locked version is.
  void (*update_locked)(const LimitId& id, const RowVersion* version, const RowWrite& row) = nullptr;
  // Deletes every row of (name, key), all shards; whether any existed.
  bool (*delete_limit)(const LimitId& id) = nullptr;
  // Deletes the rows idle at `now` (the same as no row); how many.
  int64 (*delete_idle)(Micros now) = nullptr;
  // Hands every row to `sink`, in (name, key NULL first, shard) order.
  void (*scan_status)(StatusRowSink sink, void* context) = nullptr;
  // Locks (as FOR UPDATE) the rows a change of config changes: those of
  // (name, key), or with key nullptr of every key of the name that has no
  // override; *out receives them palloc'd, ordered by key (NULL first) and
  // shard, with their identity. Returns how many. (config_changes.cpp
  // carries them over with the steps above.)
  int (*lock_rows_for_change)(text* name, text* key, KeyedRow** out) = nullptr;
  // (Undo::kByRefund.) Runs `step` on the row of `id` (shard 0: such a
  // storage keeps one row per limit) under the storage's lock on it, and
  // stores what it writes; a new row must fit `room`.
  ModifyResult (*modify)(const LimitId& id, const NewRowRoom& room, ModifyStep step, void* context) = nullptr;
  // (Undo::kByRefund.) Raise the storage's errors: modify found no room
  // for the call's new row (why: what modify returned), and a call under a
  // config its own transaction changed and has not committed (ConfigChangedHere:
  // such a storage's rows are not rolled back with the change).
  void (*raise_no_room)(const LimitCall& call, ModifyResult why) = nullptr;
  void (*raise_uncommitted_config)(const LimitCall& call) = nullptr;
  // PREPARE TRANSACTION while the transaction holds a grant the storage
  // would have to give back at its rollback: 0A000.
  void (*raise_prepare_refused)() = nullptr;
  // Forgets every row of `database`, which was dropped or whose extension
  // was: a storage outside the database's own tables (nullptr for one inside
  // them, which PostgreSQL drops). Called while the DROP runs with
  // at_commit false (it may raise: it only makes ready what the second call
  // needs), then at its commit with at_commit true (it never raises).
  void (*forget_database)(Oid database, bool at_commit) = nullptr;
};

static_assert(std::is_trivially_destructible_v<StoredState>);
static_assert(std::is_trivially_destructible_v<RowWrite>);
static_assert(std::is_trivially_destructible_v<KeyedRow>);
static_assert(std::is_trivially_destructible_v<Storage>);

}  // namespace ratelimit_pg
