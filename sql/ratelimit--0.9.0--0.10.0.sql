/* ratelimit 0.9.0 -> 0.10.0: the library's memory-limit state file and router fixes; no SQL object changes */

\echo Use "ALTER EXTENSION ratelimit UPDATE TO '0.10.0'" to load this file. \quit

-- 0.10.0 changes the library only (docs/operations.md, "What each version
-- adds"): memory limits are saved at a clean shutdown and read back at the
-- next start in one pass each way, in format 4 of ratelimit_memory.state
-- (format 3, as 0.8.0 and 0.9.0 wrote it, is still read); and the router's
-- connections (ratelimit_proxy_route) release every libpq result on every
-- error path and keep a call's plan until the call ends. No function,
-- table or type changes, so this script has nothing to do but record the
-- version.
