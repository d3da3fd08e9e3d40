/* ratelimit 0.8.0 -> 0.9.0: the library's memory limits at a smaller footprint and a leaner call; no SQL object changes */

\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.9.0'" to load this file. \quit

-- 0.9.0 changes the library only (docs/operations.md, "What each version
-- adds"): memory limits keep a name and key of up to 56 bytes together in
-- a compact entry (about 155 bytes of shared memory per key at
-- ratelimit.memory_max_keys = 1000000, against about 967), longer ones up to
-- the 236-byte bound in a table of their own, with bounds on long entries
-- and distinct names; a memory call no longer locks the config tables (it
-- accepts the invalidations their changes send, docs/internals.md, "Config
-- freshness"); and ratelimit_proxy 0.9.0's router calls the partitions'
-- functions of 0.8.0 over its own connections. No function, table or type
-- changes, so this script has nothing to do but record the version.
