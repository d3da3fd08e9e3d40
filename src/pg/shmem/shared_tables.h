// The extension's one shared-memory module (shared_tables.cpp): PostgreSQL's
// dshash tables over one DSA, each with a fixed-size header, for whoever
// registers one in _PG_init (DefineSharedTable): a storage keeping its
// rows in shared memory, ratelimit_stats' names (stats_names.cpp).
//
// Where the memory comes from: with shared_preload_libraries = 'ratelimit',
// a block of the main shared memory, sized at server start, holding the
// control block and the DSA area in place (never grown: its size limit is
// its size, as pgstat's DSA is made in the postmaster); else, from
// PostgreSQL 17, a segment of the dynamic shared memory registry holding the
// control block, and a DSA of its own (grown as needed); else (15 without
// the preload) none.
//
// A table's partition lock is dshash's (one of 128 per table); no call
// takes a lock over a whole table, but a sweep (dshash_seq_*), which takes
// the partitions one at a time.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "lib/dshash.h"
}

namespace ratelimit_pg {

// A table, as DefineSharedTable numbered it: every process runs _PG_init's
// registrations in the same order, so a number means the same table in all.
using SharedTable = int;
constexpr SharedTable kNoSharedTable = -1;
// The most tables the control block has room for.
constexpr int kMaxSharedTables = 4;

// What one table holds; given in _PG_init, before RequestSharedTables.
struct SharedTableSpec {
  const char* tranche_name;  // its partition locks' name in pg_stat_activity
  size_t key_size;           // the key is the entry's first key_size bytes
  size_t entry_size;
  // Both get the table's header as their arg (for a seed kept there).
  dshash_compare_function compare;
  dshash_hash_function hash;
  size_t header_size;                 // the table's header, in the control block
  void (*init_header)(void* header);  // once, when the memory is made
  int (*max_entries)();               // the most entries (sizes the preloaded block)
  // With the preload only: bytes of the control block for each backend
  // (MaxBackends of them, each at a cache line's start, zeroed), 0 for none.
  size_t per_backend_size = 0;
};

// Registers a table (in _PG_init, before RequestSharedTables); its number.
SharedTable DefineSharedTable(const SharedTableSpec& spec);
// A random seed for a table's hash (in its init_header): callers choose
// the keys, and must not be able to put them all in one partition.
uint64 NewTableSeed();
// A key's hash under a seed (what the tables' hash functions return).
uint32 SeededHash(const void* bytes, int len, uint64 seed);
// Asks for the main shared memory; with shared_preload_libraries only.
void RequestSharedTables();
// Whether the memory is the main shared memory (the library was preloaded).
bool SharedTablesPreloaded();
// The table attached in this backend, and its header; nullptr (and *header
// nullptr) when there is no shared memory. Attaches on first use.
dshash_table* AttachSharedTable(SharedTable table, void** header);
// What a sorted scan keeps of one entry: copies it (as much as the scan
// needs) into `out` and returns true, or returns false to skip it. Runs
// under the entry's partition lock (shared): it may palloc, not wait.
using EntryCopier = bool (*)(void* entry, void* out, void* arg);
// The one way a view reads a shared table: the entries `copy` keeps, copied
// a partition at a time under its lock into a palloc'd array of `size`-byte
// elements, then sorted by `compare` with no lock held, so rows are formed
// (and may raise) after every lock is released. How many; *out the array.
int CopySorted(dshash_table* table, size_t size, EntryCopier copy, void* arg,
               int (*compare)(const void*, const void*), void** out);
// The table's per-backend blocks (SharedTableSpec::per_backend_size), as
// one array of *count blocks of *stride bytes; nullptr without the preload.
// Attaches on first use.
void* PerBackendBlocks(SharedTable table, int* count, size_t* stride);
// Detaches this process (the postmaster, after it loaded or saved memory
// limits: the processes it forks attach for themselves).
void DetachSharedTables();

}  // namespace ratelimit_pg
