// The worker that keeps memory limits in the WAL across checkpoints
// (memory_guard.cpp), with ratelimit.memory_durability = wal.
//
// Crash recovery replays the WAL from the redo point of the last completed
// checkpoint. A table's page written long ago survives because the
// checkpoint flushed it; a memory entry written long ago has only its WAL
// record, from before that redo point, and an extension has no checkpoint
// hook. So before any checkpoint completes, every live entry whose last
// record precedes its redo point is logged again, after it (as a page's
// first change after a checkpoint logs the whole page).
//
// How a checkpoint is made to wait, with PostgreSQL's own machinery: a
// checkpoint, after its redo point is set and its buffers are flushed,
// waits for every process whose PGPROC has DELAY_CHKPT_COMPLETE set to move
// on to another virtual transaction id (CreateCheckPoint, as it waits for a
// commit between its WAL record and pg_xact). The worker keeps that flag set
// for its whole life and moves its virtual transaction id on only while it
// holds ProcArrayLock exclusively (the lock the checkpoint takes to collect
// the ids), having seen, under that lock, that the redo point is one it has
// already logged every entry after. A checkpoint that collected the worker's
// id did so after setting its redo point, so the worker's next look sees
// it, logs every older entry first, and only then lets it complete.
//
// Writes are logged only once the worker has logged every entry after the
// server started (memory_storage.cpp's WaitUntilDurable): the entries a
// start reads back, or a crash recovery ends with, are kept in the base
// file until then (memory_persist.h). docs/internals.md, "Durable memory
// limits", has the whole argument.
#pragma once

namespace ratelimit_pg {

// In _PG_init with the preload: registers the worker (it runs only with
// memory_durability = wal).
void RegisterMemoryGuard();

}  // namespace ratelimit_pg
