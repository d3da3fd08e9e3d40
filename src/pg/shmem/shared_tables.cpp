// The shared-memory module (shared_tables.h): one control block, one DSA,
// and a dshash table per SharedTable registered.
#include <algorithm>
#include <cstring>
#include <iterator>

#include "shmem/shared_tables.h"

extern "C" {
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/dsa.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

#include "support/compat.h"

namespace ratelimit_pg {
namespace {

// The block's name carries its layout's version: a library of another
// layout loaded into the same running server (the registry segment lives
// until the restart) gets a block of its own, never this one.
constexpr const char* kBlockName = "ratelimit_shared_tables_v3";
constexpr const char* kAreaTrancheName = "ratelimit_dsa";

struct TableControl {
  int tranche_id;
  dshash_table_handle handle;
  Size header_offset;    // from the control block's start
  Size backends_offset;  // its per-backend blocks (preload), 0 for none
  int backends;          // how many (MaxBackends at server start)
  Size backend_stride;   // each block's bytes, a multiple of the cache line
};

struct SharedControl {
  bool initialized;  // set last (a registry block whose making failed is never used)
  int area_tranche_id;
  dsa_handle area_handle;  // the registry's DSA (no preload)
  Size area_offset;        // the in-place DSA (preload): from the block's start
  Size area_size;
  TableControl tables[kMaxSharedTables];
  // followed by the tables' headers, then (preload) the DSA area
};

SharedTableSpec specs[kMaxSharedTables];
bool spec_given[kMaxSharedTables];

SharedControl* control = nullptr;
bool preloaded = false;
bool attached = false;  // this backend attached, or found there is no memory
dsa_area* area = nullptr;
dshash_table* tables[kMaxSharedTables];
shmem_request_hook_type previous_request_hook = nullptr;
shmem_startup_hook_type previous_startup_hook = nullptr;

dshash_parameters ParamsOf(int table, int tranche_id) {
  dshash_parameters params{};
  params.key_size = specs[table].key_size;
  params.entry_size = specs[table].entry_size;
  params.compare_function = specs[table].compare;
  params.hash_function = specs[table].hash;
  compat::SetDshashCopy(&params);
  params.tranche_id = tranche_id;
  return params;
}

// A table's per-backend block, padded to whole cache lines, so that two
// backends never write one line; 0 without the preload (the registry
// segment has none: its size is fixed before MaxBackends matters).
Size BackendStride(int table) {
  if (!preloaded || specs[table].per_backend_size == 0) return 0;
  return TYPEALIGN(PG_CACHE_LINE_SIZE, specs[table].per_backend_size);
}

Size ControlSize() {
  Size size = MAXALIGN(sizeof(SharedControl));
  for (int i = 0; i < kMaxSharedTables; ++i)
    if (spec_given[i]) size = add_size(size, MAXALIGN(specs[i].header_size));
  for (int i = 0; i < kMaxSharedTables; ++i) {
    if (!spec_given[i] || BackendStride(i) == 0) continue;
    // the first block at a cache line's start, whatever the block's own alignment
    size = add_size(size, add_size(PG_CACHE_LINE_SIZE, mul_size(BackendStride(i), MaxBackends)));
  }
  return size;
}

// The DSA's size classes (src/backend/utils/mmgr/dsa.c's dsa_size_classes,
// the same from PostgreSQL 10 to 18): an object takes the smallest that
// holds it; larger ones take whole 4 kB pages.
constexpr Size kDsaClasses[] = {8,    16,   24,   32,   40,   48,   56,   64,   80,   96,   112,  128,
                                160,  192,  224,  256,  320,  384,  448,  512,  640,  768,  896,  1024,
                                1280, 1560, 1816, 2048, 2616, 3120, 3640, 4096, 5456, 6552, 7280, 8192};
constexpr Size kDsaPage = 4096;
// A superblock of a size class: 16 pages (dsa.c's DSA_SUPERBLOCK_SIZE).
constexpr Size kDsaSuperblock = 16 * kDsaPage;
// dsa.c's span record (dsa_area_span: 56 bytes with 8-byte pointers,
// counted as 64), one per superblock and per object larger than the largest
// class, in pages of their own, each holding its own record first.
constexpr Size kDsaSpanRecord = 64;
constexpr Size kDsaSpanRecordsPerPage = kDsaPage / kDsaSpanRecord - 1;
// dshash's item header before each entry (a dsa_pointer and the hash, MAXALIGNed).
constexpr Size kDshashItemHeader = 16;

Size DsaObjectSize(Size bytes) {
  for (Size size : kDsaClasses)
    if (bytes <= size) return size;
  return TYPEALIGN(kDsaPage, bytes);
}

// What `count` objects of `bytes` each take of the DSA: whole superblocks
// of their size class, each holding as many as fit whole (a class that
// does not divide 64 kB leaves the rest of each unused: 256 bytes for 320),
// or whole pages for a larger one; and the span records those need.
struct DsaFootprint {
  Size bytes = 0;
  Size spans = 0;
  void Add(Size count, Size object_bytes) {
    Size object = DsaObjectSize(object_bytes);
    if (object > kDsaClasses[std::size(kDsaClasses) - 1]) {
      bytes = add_size(bytes, mul_size(count, object));
      spans = add_size(spans, count);
      return;
    }
    Size per_superblock = kDsaSuperblock / object;
    Size superblocks = (count + per_superblock - 1) / per_superblock;
    bytes = add_size(bytes, mul_size(superblocks, kDsaSuperblock));
    spans = add_size(spans, superblocks);
  }
};

// What one table takes at its most entries: each entry with dshash's item
// header, in its size class, and the bucket arrays. dshash doubles its
// array (8 bytes a bucket) when a partition passes a load of 3/4, making the
// new one before it frees the old: at most entries its array is the
// smallest power of two with a load of at most 1/2 (a partition's load
// varies around the table's); the doubling to it, at the latest when 2/5 of
// it is used, holds one and a half arrays. Besides: dshash's control object
// and a partly filled superblock (one superblock), and for each doubling a
// run of freed pages too short for a superblock (16 pages).
DsaFootprint TableFootprint(Size entries, Size entry_size) {
  Size item = kDshashItemHeader + entry_size;
  Size buckets = 128;
  Size doublings = 0;
  while (buckets < entries * 2) {
    buckets *= 2;
    ++doublings;
  }
  Size bucket_bytes = buckets * sizeof(dsa_pointer);
  DsaFootprint full;
  full.Add(entries, item);
  full.Add(1, bucket_bytes);
  DsaFootprint doubling;
  doubling.Add(std::min(entries, buckets * 2 / 5), item);
  doubling.Add(1, bucket_bytes);
  doubling.Add(1, bucket_bytes / 2);
  DsaFootprint most;
  most.bytes = std::max(full.bytes, doubling.bytes);
  most.spans = std::max(full.spans, doubling.spans) + 1;
  most.bytes = add_size(most.bytes, mul_size(doublings + 1, kDsaSuperblock));
  return most;
}

// The in-place DSA's size for the tables at their most entries, with the
// DSA's own pages: its control block and free page manager
// (dsa_minimum_size()), the span records' pages, its page map (8 bytes per
// 4 kB page), and 1/256 of it for the free page manager's own pages and
// runs of free pages split by one-page allocations.
Size AreaSize() {
  DsaFootprint area;
  for (int i = 0; i < kMaxSharedTables; ++i) {
    if (!spec_given[i]) continue;
    DsaFootprint table = TableFootprint(static_cast<Size>(specs[i].max_entries()), specs[i].entry_size);
    area.bytes = add_size(area.bytes, table.bytes);
    area.spans = add_size(area.spans, table.spans);
  }
  Size size = add_size(dsa_minimum_size(), area.bytes);
  size = add_size(size, (area.spans + kDsaSpanRecordsPerPage - 1) / kDsaSpanRecordsPerPage * kDsaPage);
  size = add_size(size, size / 256);
  return add_size(size, size / (kDsaPage / sizeof(dsa_pointer)));
}

// Registers the locks' names in this backend (for wait events).
void NameTranches() {
  LWLockRegisterTranche(control->area_tranche_id, kAreaTrancheName);
  for (int i = 0; i < kMaxSharedTables; ++i)
    if (spec_given[i]) LWLockRegisterTranche(control->tables[i].tranche_id, specs[i].tranche_name);
}

// Fills the control block and the headers (once, by whoever makes them).
void InitControl(SharedControl* c) {
  std::memset(c, 0, sizeof(SharedControl));
  c->area_tranche_id = LWLockNewTrancheId();
  Size offset = MAXALIGN(sizeof(SharedControl));
  for (int i = 0; i < kMaxSharedTables; ++i) {
    if (!spec_given[i]) continue;
    c->tables[i].tranche_id = LWLockNewTrancheId();
    c->tables[i].header_offset = offset;
    specs[i].init_header(reinterpret_cast<char*>(c) + offset);
    offset += MAXALIGN(specs[i].header_size);
  }
  for (int i = 0; i < kMaxSharedTables; ++i) {
    if (!spec_given[i] || BackendStride(i) == 0) continue;
    char* start = reinterpret_cast<char*>(c) + offset;
    Size pad = reinterpret_cast<char*>(TYPEALIGN(PG_CACHE_LINE_SIZE, start)) - start;
    c->tables[i].backends_offset = offset + pad;
    c->tables[i].backends = MaxBackends;
    c->tables[i].backend_stride = BackendStride(i);
    std::memset(start + pad, 0, mul_size(BackendStride(i), MaxBackends));
    offset = add_size(offset, add_size(PG_CACHE_LINE_SIZE, mul_size(BackendStride(i), MaxBackends)));
  }
}

void* HeaderOf(SharedControl* c, int table) {
  return reinterpret_cast<char*>(c) + c->tables[table].header_offset;
}

// Makes the tables in `a` and keeps their handles.
void CreateTables(SharedControl* c, dsa_area* a, bool keep) {
  for (int i = 0; i < kMaxSharedTables; ++i) {
    if (!spec_given[i]) continue;
    dshash_parameters params = ParamsOf(i, c->tables[i].tranche_id);
    dshash_table* table = dshash_create(a, &params, HeaderOf(c, i));
    c->tables[i].handle = dshash_get_hash_table_handle(table);
    if (keep) {
      tables[i] = table;
    } else {
      dshash_detach(table);
    }
  }
}

void RequestShmem() {
  if (previous_request_hook != nullptr) previous_request_hook();
  RequestAddinShmemSpace(add_size(ControlSize(), AreaSize()));
}

// In the postmaster: the block with the DSA in place, limited to its size
// so that nothing of it ever lives outside the main shared memory.
void StartupShmem() {
  if (previous_startup_hook != nullptr) previous_startup_hook();
  LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
  bool found = false;
  Size area_size = AreaSize();
  auto* c =
      static_cast<SharedControl*>(ShmemInitStruct(kBlockName, add_size(ControlSize(), area_size), &found));
  if (!found) {
    InitControl(c);
    c->area_offset = ControlSize();
    c->area_size = area_size;
    dsa_area* a = dsa_create_in_place(reinterpret_cast<char*>(c) + c->area_offset, area_size,
                                      c->area_tranche_id, nullptr);
    dsa_pin(a);
    dsa_set_size_limit(a, area_size);
    CreateTables(c, a, false);
    dsa_detach(a);
    c->initialized = true;
  }
  LWLockRelease(AddinShmemInitLock);
  control = c;
}

// In a backend, without the preload (17 on): the registry segment's init.
void InitRegistryBlock(void* memory) {
  auto* c = static_cast<SharedControl*>(memory);
  InitControl(c);
  MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
  area = dsa_create(c->area_tranche_id);
  dsa_pin(area);
  dsa_pin_mapping(area);
  CreateTables(c, area, true);
  c->area_handle = dsa_get_handle(area);
  MemoryContextSwitchTo(old);
  c->initialized = true;
}

// Attaches this backend (once; an error leaves it to the next call): the
// block, the area and every table.
void Attach() {
  if (control == nullptr) {
    bool found = false;
    control = static_cast<SharedControl*>(
        compat::NamedSharedSegment(kBlockName, ControlSize(), InitRegistryBlock, &found));
    if (control == nullptr) {
      attached = true;  // none to be had (15 without the preload)
      return;
    }
    if (!found) {  // made (and attached) by InitRegistryBlock
      NameTranches();
      attached = true;
      return;
    }
  }
  if (!control->initialized)
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("ratelimit's shared memory was not made: an earlier attempt failed"),
                    errhint("Restart the server, or add ratelimit to shared_preload_libraries.")));
  NameTranches();
  MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
  if (preloaded) {
    area = dsa_attach_in_place(reinterpret_cast<char*>(control) + control->area_offset, nullptr);
  } else {
    area = dsa_attach(control->area_handle);
  }
  dsa_pin_mapping(area);
  for (int i = 0; i < kMaxSharedTables; ++i) {
    if (!spec_given[i]) continue;
    dshash_parameters params = ParamsOf(i, control->tables[i].tranche_id);
    tables[i] = dshash_attach(area, &params, control->tables[i].handle, HeaderOf(control, i));
  }
  MemoryContextSwitchTo(old);
  attached = true;
}

}  // namespace

SharedTable DefineSharedTable(const SharedTableSpec& spec) {
  SharedTable table = 0;
  while (table < kMaxSharedTables && spec_given[table]) ++table;
  if (table == kMaxSharedTables) elog(ERROR, "ratelimit: more than %d shared tables", kMaxSharedTables);
  specs[table] = spec;
  spec_given[table] = true;
  return table;
}

void RequestSharedTables() {
  if (!process_shared_preload_libraries_in_progress) return;
  preloaded = true;
  previous_request_hook = shmem_request_hook;
  shmem_request_hook = RequestShmem;
  previous_startup_hook = shmem_startup_hook;
  shmem_startup_hook = StartupShmem;
}

bool SharedTablesPreloaded() { return preloaded; }

uint64 NewTableSeed() {
  uint64 seed = 0;
  if (!pg_strong_random(&seed, sizeof seed))
    seed = static_cast<uint64>(GetCurrentTimestamp()) ^ (static_cast<uint64>(MyProcPid) << 32);
  return seed;
}

uint32 SeededHash(const void* bytes, int len, uint64 seed) {
  uint64 h = hash_bytes_extended(static_cast<const unsigned char*>(bytes), len, seed);
  return static_cast<uint32>(h ^ (h >> 32));
}

int CopySorted(dshash_table* table, size_t size, EntryCopier copy, void* arg,
               int (*compare)(const void*, const void*), void** out) {
  int capacity = 64;
  int count = 0;
  auto* copied = static_cast<char*>(palloc(size * capacity));
  dshash_seq_status scan;
  dshash_seq_init(&scan, table, false);
  while (void* entry = dshash_seq_next(&scan)) {
    if (count == capacity) {
      capacity *= 2;
      copied = static_cast<char*>(repalloc_huge(copied, size * capacity));
    }
    if (copy(entry, copied + size * count, arg)) ++count;
  }
  dshash_seq_term(&scan);
  qsort(copied, count, size, compare);
  *out = copied;
  return count;
}

void DetachSharedTables() {
  for (int i = 0; i < kMaxSharedTables; ++i) {
    if (tables[i] == nullptr) continue;
    dshash_detach(tables[i]);
    tables[i] = nullptr;
  }
  if (area != nullptr) dsa_detach(area);
  area = nullptr;
  attached = false;
}

void* PerBackendBlocks(SharedTable table, int* count, size_t* stride) {
  if (!attached) Attach();
  int i = table;
  if (control == nullptr || control->tables[i].backends_offset == 0) {
    *count = 0;
    *stride = 0;
    return nullptr;
  }
  *count = control->tables[i].backends;
  *stride = control->tables[i].backend_stride;
  return reinterpret_cast<char*>(control) + control->tables[i].backends_offset;
}

dshash_table* AttachSharedTable(SharedTable table, void** header) {
  if (!attached) Attach();
  int i = table;
  if (control == nullptr || tables[i] == nullptr) {
    if (header != nullptr) *header = nullptr;
    return nullptr;
  }
  if (header != nullptr) *header = reinterpret_cast<char*>(control) + control->tables[i].header_offset;
  return tables[i];
}

}  // namespace ratelimit_pg
