/* ratelimit 0.10.0 -> 0.11.0: memory limits through the WAL, and the library's fixes; no SQL object changes */

\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.11.0'" to load this file. \quit

-- 0.11.0 changes the library only (docs/operations.md, "What each version
-- adds"): memory limits survive a crash and a failover through PostgreSQL's
-- WAL (the setting ratelimit.memory_durability, a WAL resource manager and
-- a background worker, with shared_preload_libraries); a dropped database or
-- extension forgets its memory limits and ratelimit_stats names; the
-- router's values cross to the partitions bit-exact (binary), and every
-- C function PUBLIC can call checks each argument's type before it reads
-- it. No function, table or type changes, so this script has nothing to do
-- but record the version.
