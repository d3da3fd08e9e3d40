// The memory storage's state file (memory_state_file.cpp): its format (a
// header with a format version, the PostgreSQL major, the cluster's
// identity and a CRC, then the entries' records), written in one pass from
// the tables and read back in one pass into them, each record checked. When
// a file is written and read, and what is said about it, is
// memory_persist.cpp's; docs/memory.md says what an operator sees.
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

// The files, in the data directory: the state a clean shutdown saved, the
// file being written, the file being loaded, and the base file kept for
// durability (memory_persist.h).
inline constexpr const char* kMemoryStateFile = "ratelimit_memory.state";
inline constexpr const char* kMemoryTempFile = "ratelimit_memory.state.tmp";
inline constexpr const char* kMemoryLoadingFile = "ratelimit_memory.state.loading";
inline constexpr const char* kMemoryBaseFile = "ratelimit_memory.base";

// What pg_control says now: whether the server shut down cleanly (its last
// checkpoint was a shutdown checkpoint; an immediate stop leaves it "in
// production"), and which cluster and checkpoint it is (0: unreadable).
struct ControlFacts {
  bool shut_down;
  uint64 system_identifier;
  uint64 checkpoint;
};

ControlFacts ReadControlFacts();

// fsync_fname_ext's steps (fd.c) without its ereport, so that the caller
// says what the failure means: 0, or -1 with errno set. A file that does
// not exist counts as synced when `missing_ok`; a directory that cannot be
// fsynced (EBADF, EINVAL on some systems) counts as synced, as there.
int FsyncPath(const char* path, bool is_dir, bool missing_ok);

// How the last WriteMemoryStateFile went, past its count: the errno of its
// first failed step; whether its file was renamed into place, with how many
// records; and, if a step after the rename failed, which (the file is then
// in place but may not survive a crash of the machine). The caller empties
// it before the write.
struct StateFileWrite {
  int write_errno;
  bool renamed;
  int64 records_in_place;
  const char* not_durable;
};
extern StateFileWrite state_file_write;

// Writes every live entry to kMemoryTempFile, in one pass, then renames it
// durably to `target`; how many, or -1 (the temporary file removed). May
// raise (then the caller removes the temporary file).
int64 WriteMemoryStateFile(const ControlFacts& facts, const char* target);

// What is wrong with a file read back, if anything.
enum class FileCheck { kGood, kHeader, kVersion, kStale, kRecord, kLength, kChecksum };

// How a load went: what is wrong with the file, whether an error was
// raised while it was read, how many entries it made and how many of its
// records found no room.
struct StateFileLoad {
  FileCheck check;
  bool failed;
  int64 restored;
  int64 skipped;
};

// Loads `path`, each entry as it is read; a file found damaged or an error
// leaves none of its entries. `strict`: only the file of this cluster's
// last shutdown is read (else, the base file, any file of this cluster).
// Whether it loaded. Never raises.
bool LoadMemoryStateFile(const char* path, bool strict, StateFileLoad* out);

}  // namespace ratelimit_pg
