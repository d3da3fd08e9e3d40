/* ratelimit_proxy 0.9.0, complete: the ratelimit API in a router database, routed to partition databases */

\echo Use "CREATE EXTENSION ratelimit_proxy" to load this file. \quit

-- What ratelimit_proxy 0.9.0 is, in one script: CREATE EXTENSION
-- ratelimit_proxy runs this file, not ratelimit_proxy--0.4.0.sql and the
-- update scripts after it. Those stay, unedited, for routers installed at
-- an earlier release; updated along them, a router has exactly the catalog
-- this script gives it (scripts/plproxy-test.sh compares the two object by
-- object, from every release). A new release copies this file and makes its
-- change both in the copy and in the new update script (docs/internals.md,
-- "Making a release").
--
-- The router holds no limit state. Its functions have the signatures of
-- ratelimit 0.8.0's and run on the partitions of the cluster 'ratelimit':
-- the foreign server of that name (CREATE SERVER ratelimit FOREIGN DATA
-- WRAPPER plproxy OPTIONS (p0 '...', p1 '...', ...)) and the caller's user
-- mapping, as PL/Proxy reads them; each partition is an ordinary database
-- with CREATE EXTENSION ratelimit, in a schema of the same name as this
-- extension's. A key's partition is ratelimit_hash(name, key) & (partitions
-- - 1). Each remote call runs in a transaction of its own on its partition
-- and commits there before the router sees its answer.
--
-- The calls go over the router's own connections (one per partition and
-- backend, each statement prepared once): every ratelimit_proxy_* function
-- below that reaches the partitions is ratelimit_proxy_route, a C function
-- of the ratelimit library (src/pg/api/routing.cpp), which routes as
-- PL/Proxy's RUN ON hash, ALL and ANY do and calls the partition's function
-- of the same name; the partition returns an error as data (error_state,
-- error_message, error_detail, error_hint) and keeps the connection. The
-- public functions raise that error as the partition raised it. PL/Proxy is
-- still required: its foreign data wrapper validates the server's options,
-- and an application's own PL/Proxy functions run beside these.
--
-- In order: the types, the functions by family, the views, who may call and
-- read what, and the documentation of every object (COMMENT ON).

--------------------------------------------------------------------------
-- Types
--------------------------------------------------------------------------

CREATE TYPE @extschema@.ratelimit_result AS (
    ok          boolean,
    retry_after double precision,
    retry_at    timestamptz,
    remaining   double precision,
    reset_after double precision
);

-- The partitions' rows for ratelimit_proxy_limit, _check and _limit_all:
-- named row types, whose row description comes from the type cache.
CREATE TYPE @extschema@.ratelimit_proxy_answer AS (
    ok boolean, retry_after double precision, retry_at timestamptz,
    remaining double precision, reset_after double precision,
    error_state text, error_message text, error_detail text, error_hint text);

CREATE TYPE @extschema@.ratelimit_proxy_entry AS (
    name text, key text, ok boolean, retry_after double precision, retry_at timestamptz,
    remaining double precision, reset_after double precision,
    error_state text, error_message text, error_detail text, error_hint text);

--------------------------------------------------------------------------
-- Functions: where a limit lives
--------------------------------------------------------------------------

-- The partition hash. Stable across PostgreSQL versions and platforms (md5
-- is fixed by RFC 1321; hashtext and hashtextextended are not promised to
-- be): the first 32 bits of md5 over an injective encoding of (name, key),
-- read big-endian as a signed int4. A NULL key (the global limit) and ''
-- encode differently; a NULL name (an error on the partition) hashes as ''.
CREATE FUNCTION @extschema@.ratelimit_hash(name text, key text DEFAULT NULL)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ('x' || left(md5(octet_length(coalesce(name, '')) || ':' || coalesce(name, '')
                        || coalesce('=' || key, '')), 8))::bit(32)::integer;

CREATE FUNCTION @extschema@.ratelimit_partitions()
RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT count(*)::integer
    FROM pg_catalog.pg_foreign_server AS s
    CROSS JOIN LATERAL pg_catalog.pg_options_to_table(s.srvoptions) AS o
    WHERE s.srvname = 'ratelimit' AND o.option_name ~ '^p[0-9]+$';
END;

CREATE FUNCTION @extschema@.ratelimit_partition(name text, key text DEFAULT NULL)
RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT @extschema@.ratelimit_hash(name, key) & (@extschema@.ratelimit_partitions() - 1);
END;

-- Where ratelimit_limit_all runs: the partition of every element, or 0A000
-- when they are not all on one (all or nothing across partitions would need
-- two-phase commit). An argument the partitions would refuse (not an array
-- of objects with a string name and a string or null key) goes to the first
-- element's partition, or partition 0, which raises the usual error.
CREATE FUNCTION @extschema@.ratelimit_limit_all_hash(limits jsonb)
RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    mask        integer := @extschema@.ratelimit_partitions() - 1;
    element     jsonb;
    idx         integer := 0;
    first_hash  integer;
    first_label text;
    hash        integer;
BEGIN
    IF jsonb_typeof(limits) IS DISTINCT FROM 'array' THEN
        RETURN 0;
    END IF;
    FOR element IN SELECT e FROM jsonb_array_elements(limits) AS e LOOP
        IF jsonb_typeof(element) <> 'object' OR jsonb_typeof(element -> 'name') IS DISTINCT FROM 'string'
           OR coalesce(jsonb_typeof(element -> 'key'), 'null') NOT IN ('string', 'null') THEN
            RETURN coalesce(first_hash, 0);
        END IF;
        hash := @extschema@.ratelimit_hash(element ->> 'name', element ->> 'key');
        IF first_hash IS NULL THEN
            first_hash := hash;
            first_label := format('limits[%s] (%s, %s)', idx, element -> 'name', coalesce(element -> 'key', 'null'));
        ELSIF hash & mask <> first_hash & mask THEN
            RAISE EXCEPTION 'limits span partitions % and %: ratelimit_limit_all through the router runs on one partition',
                    first_hash & mask, hash & mask
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = format('%s is on partition %s, limits[%s] (%s, %s) on partition %s. Nothing was consumed: all or nothing across partitions would need two-phase commit.',
                                      first_label, first_hash & mask, idx, element -> 'name',
                                      coalesce(element -> 'key', 'null'), hash & mask),
                      HINT = 'Call ratelimit_limit_all once per partition (ratelimit_partition(name, key) tells which), or route the caller''s own function to the partition of its key.';
        END IF;
        idx := idx + 1;
    END LOOP;
    RETURN coalesce(first_hash, 0);
END;
$$;

--------------------------------------------------------------------------
-- Functions: the routed calls (ratelimit_proxy_route)
--------------------------------------------------------------------------

-- To the partition of hash (computed by the caller): the partition's
-- ratelimit_proxy_<function> with the other arguments.
CREATE FUNCTION @extschema@.ratelimit_proxy_limit(
    hash integer, name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text)
RETURNS @extschema@.ratelimit_proxy_answer
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_proxy_check(
    hash integer, name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text)
RETURNS @extschema@.ratelimit_proxy_answer
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_proxy_limit_all(hash integer, limits jsonb, throws boolean, error_format text)
RETURNS SETOF @extschema@.ratelimit_proxy_entry
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_proxy_value(
    hash integer, name text, key text, config jsonb,
    OUT value double precision, OUT ts timestamptz,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
RETURNS record
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_proxy_reset(
    hash integer, name text, key text,
    OUT reset boolean,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
RETURNS record
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_proxy_refund(
    hash integer, name text, key text, count double precision, config jsonb,
    OUT ok boolean, OUT retry_after double precision, OUT retry_at timestamptz,
    OUT remaining double precision, OUT reset_after double precision,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
RETURNS record
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_proxy_headers(
    hash integer, name text, result @extschema@.ratelimit_result, config jsonb, key text,
    OUT headers jsonb,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
RETURNS record
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_proxy_override(
    hash integer, name text, key text, config jsonb,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
RETURNS record
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_proxy_unoverride(
    hash integer, name text, key text,
    OUT unoverridden boolean,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
RETURNS record
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

-- To every partition, one row each (RUN ON ALL).
CREATE FUNCTION @extschema@.ratelimit_proxy_define(name text, config jsonb)
RETURNS TABLE (error_state text, error_message text, error_detail text, error_hint text)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_proxy_undefine(name text)
RETURNS TABLE (undefined boolean, error_state text, error_message text, error_detail text, error_hint text)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_proxy_cleanup()
RETURNS TABLE (deleted bigint, error_state text, error_message text, error_detail text, error_hint text)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_proxy_stats_reset()
RETURNS TABLE (error_state text, error_message text, error_detail text, error_hint text)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

-- The views' rows of every partition, each with its server (the
-- postmaster's start time and port: the counters of ratelimit_stats and the
-- memory limits are the server's shared memory, which every partition
-- database of one server sees) and, for ratelimit_status, its database.
-- These read the partitions' views: they take no argument and run no code
-- a caller's input could make fail.
CREATE FUNCTION @extschema@.ratelimit_proxy_stats()
RETURNS TABLE (server text, name text, granted bigint, refused bigint, shadow_refused bigint,
               tokens_granted double precision, lock_waits bigint, stats_reset timestamptz,
               memory_full bigint)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_proxy_status()
RETURNS TABLE (server text, db text, name text, key text, shard smallint, kind text,
               value double precision, ts timestamptz, stored_value double precision,
               idle_at timestamptz, storage text)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

-- To any one partition (RUN ON ANY): a simulation touches no limit.
CREATE FUNCTION @extschema@.ratelimit_proxy_simulate(
    config jsonb, arrivals timestamptz[], counts double precision[], name text, key text)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision,
               error_state text, error_message text, error_detail text, error_hint text)
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

-- Raising what a partition returned as data: ratelimit_proxy_raise raises
-- the error of a row (nothing when its state is NULL); ratelimit_proxy_result
-- turns a ratelimit_proxy_answer into its ratelimit_result or its error.
CREATE FUNCTION @extschema@.ratelimit_proxy_raise(state text, message text, detail text, hint text)
RETURNS void
AS '$libdir/ratelimit', 'ratelimit_proxy_raise'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.ratelimit_proxy_result(answer record)
RETURNS @extschema@.ratelimit_result
AS '$libdir/ratelimit', 'ratelimit_proxy_result'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

--------------------------------------------------------------------------
-- Functions: the ratelimit API, routed
--------------------------------------------------------------------------

-- ratelimit_limit and ratelimit_check, the hot path, are
-- ratelimit_proxy_route themselves: it computes ratelimit_hash(name, key),
-- sends the call and the session's ratelimit.error_format (PL/Proxy sends
-- no settings) to the partition's ratelimit_proxy_limit / _check, and
-- returns the row or raises the error in it.
CREATE FUNCTION @extschema@.ratelimit_limit(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.ratelimit_check(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
AS '$libdir/ratelimit', 'ratelimit_proxy_route'
LANGUAGE C VOLATILE;

-- The others are PL/pgSQL, each the same pattern: the routed call, then
-- ratelimit_proxy_raise on a row whose error_state is set. No exception
-- block (it would cost a subtransaction per call): an error of the routing
-- itself (a partition that cannot be reached, a lost connection) reaches
-- the caller naming the partition.
CREATE FUNCTION @extschema@.ratelimit_limit_all(limits jsonb, throws boolean DEFAULT false)
RETURNS TABLE (name text, key text, ok boolean, retry_after double precision, retry_at timestamptz,
               remaining double precision, reset_after double precision)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    FOR answer IN SELECT * FROM @extschema@.ratelimit_proxy_limit_all(@extschema@.ratelimit_limit_all_hash(limits),
                      limits, throws,
                      NULLIF(pg_catalog.current_setting('ratelimit.error_format', true), '')) LOOP
        IF answer.error_state IS NOT NULL THEN
            PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                      answer.error_detail, answer.error_hint);
        END IF;
        name := answer.name;
        key := answer.key;
        ok := answer.ok;
        retry_after := answer.retry_after;
        retry_at := answer.retry_at;
        remaining := answer.remaining;
        reset_after := answer.reset_after;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- On the key's partition.
CREATE FUNCTION @extschema@.ratelimit_value(name text, key text DEFAULT NULL, config jsonb DEFAULT NULL)
RETURNS TABLE (value double precision, ts timestamptz)
LANGUAGE plpgsql VOLATILE ROWS 1
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_value(@extschema@.ratelimit_hash(name, key), name, key, config);
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;
    RETURN QUERY SELECT answer.value, answer.ts;
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_reset(name text, key text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_reset(@extschema@.ratelimit_hash(name, key), name, key);
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;
    RETURN answer.reset;
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_refund(name text, key text DEFAULT NULL, count double precision DEFAULT 1, config jsonb DEFAULT NULL)
RETURNS @extschema@.ratelimit_result
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_refund(@extschema@.ratelimit_hash(name, key), name, key, count, config);
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;
    RETURN ROW(answer.ok, answer.retry_after, answer.retry_at, answer.remaining, answer.reset_after);
END;
$$;

-- On the partition of (name, key), which holds that key's override (a NULL
-- key: the partition of the name's global limit).
CREATE FUNCTION @extschema@.ratelimit_headers(name text, result @extschema@.ratelimit_result, config jsonb DEFAULT NULL, key text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_headers(@extschema@.ratelimit_hash(name, key), name, result, config, key);
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;
    RETURN answer.headers;
END;
$$;

-- Per-key overrides live with the key's state, on its partition.
CREATE FUNCTION @extschema@.ratelimit_override(name text, key text, config jsonb)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_override(@extschema@.ratelimit_hash(name, key), name, key, config);
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;

END;
$$;

CREATE FUNCTION @extschema@.ratelimit_unoverride(name text, key text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_unoverride(@extschema@.ratelimit_hash(name, key), name, key);
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;
    RETURN answer.unoverridden;
END;
$$;

-- On every partition (each in its own transaction; after an error, such as
-- a partition down, the caller runs it again).
CREATE FUNCTION @extschema@.ratelimit_define(name text, config jsonb)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    FOR answer IN SELECT * FROM @extschema@.ratelimit_proxy_define(name, config) LOOP
        IF answer.error_state IS NOT NULL THEN
            PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                      answer.error_detail, answer.error_hint);
        END IF;
    END LOOP;
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_undefine(name text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
    any_undefined boolean := false;
BEGIN
    FOR answer IN SELECT * FROM @extschema@.ratelimit_proxy_undefine(name) LOOP
        IF answer.error_state IS NOT NULL THEN
            PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                      answer.error_detail, answer.error_hint);
        END IF;
        any_undefined := any_undefined OR answer.undefined;
    END LOOP;
    RETURN any_undefined;
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_cleanup()
RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
    total bigint := 0;
BEGIN
    FOR answer IN SELECT * FROM @extschema@.ratelimit_proxy_cleanup() LOOP
        IF answer.error_state IS NOT NULL THEN
            PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                      answer.error_detail, answer.error_hint);
        END IF;
        total := total + answer.deleted;
    END LOOP;
    RETURN total;
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_stats_reset()
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    FOR answer IN SELECT * FROM @extschema@.ratelimit_proxy_stats_reset() LOOP
        IF answer.error_state IS NOT NULL THEN
            PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                      answer.error_detail, answer.error_hint);
        END IF;
    END LOOP;
END;
$$;

-- On any partition, with the same arguments and rows as one node's.
-- VOLATILE: it asks another server. The three-argument form has its
-- windows on whole periods from the Unix epoch, as on a node.
CREATE FUNCTION @extschema@.ratelimit_simulate(
    config jsonb,
    arrivals timestamptz[],
    counts double precision[],
    name text,
    key text DEFAULT NULL)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    FOR answer IN SELECT * FROM @extschema@.ratelimit_proxy_simulate(config, arrivals, counts, name, key) LOOP
        IF answer.error_state IS NOT NULL THEN
            PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                      answer.error_detail, answer.error_hint);
        END IF;
        at := answer.at;
        count := answer.count;
        ok := answer.ok;
        remaining := answer.remaining;
        retry_after := answer.retry_after;
        RETURN NEXT;
    END LOOP;
END;
$$;

CREATE FUNCTION @extschema@.ratelimit_simulate(
    config jsonb,
    arrivals timestamptz[],
    counts double precision[] DEFAULT NULL)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision)
LANGUAGE sql VOLATILE
AS $$ SELECT * FROM @extschema@.ratelimit_simulate(config, arrivals, counts, NULL::text, NULL::text) $$;

--------------------------------------------------------------------------
-- Views
--------------------------------------------------------------------------

-- Per name, the sum over the partitions' servers (a server's counters
-- counted once, however many partition databases it holds: the latest of
-- its reads). stats_reset is the latest reset of any.
CREATE VIEW @extschema@.ratelimit_stats AS
SELECT name, sum(granted)::bigint AS granted, sum(refused)::bigint AS refused,
       sum(shadow_refused)::bigint AS shadow_refused, sum(tokens_granted) AS tokens_granted,
       sum(lock_waits)::bigint AS lock_waits, max(stats_reset) AS stats_reset,
       sum(memory_full)::bigint AS memory_full
FROM (SELECT DISTINCT ON (s.server, s.name) s.*
      FROM @extschema@.ratelimit_proxy_stats() AS s
      ORDER BY s.server, s.name, s.stats_reset DESC,
               s.granted + s.refused + s.shadow_refused + s.memory_full DESC) AS per_server
GROUP BY name;

-- Every partition's rows (each database has its own table rows and memory
-- entries).
CREATE VIEW @extschema@.ratelimit_status AS
SELECT name, key, shard, kind, value, ts, stored_value, idle_at, storage
FROM @extschema@.ratelimit_proxy_status();

--------------------------------------------------------------------------
-- Privileges
--------------------------------------------------------------------------

-- The same rights as the extension's on the partitions: PUBLIC may take,
-- check and read limits, get headers and simulate; changing them is the
-- owner's. Each public function that changes limits needs EXECUTE on the
-- ratelimit_proxy_* function it calls too. The partitions check again, as
-- the role of the user mapping.
REVOKE ALL ON FUNCTION @extschema@.ratelimit_reset(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_reset(integer, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_refund(text, text, double precision, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_refund(integer, text, text, double precision, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_override(text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_override(integer, text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_unoverride(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_unoverride(integer, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_define(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_define(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_undefine(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_undefine(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_cleanup() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_cleanup() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_stats_reset() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_stats_reset() FROM PUBLIC;

-- The status of every limit is the owner's; the counters are every role's.
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_status() FROM PUBLIC;
REVOKE ALL ON @extschema@.ratelimit_status FROM PUBLIC;
GRANT SELECT ON @extschema@.ratelimit_stats TO PUBLIC;

--------------------------------------------------------------------------
-- Documentation
--------------------------------------------------------------------------

COMMENT ON TYPE @extschema@.ratelimit_result IS
'The answer of a routed call, as on the partitions: ok: granted; retry_after/retry_at: when to retry (refused) or run the reserved work (NULL when granted now); remaining: tokens left (negative when reserved); reset_after: seconds until full again.';
COMMENT ON TYPE @extschema@.ratelimit_proxy_answer IS
'The row of ratelimit_proxy_limit and ratelimit_proxy_check: ratelimit_result''s columns (NULL after an error), and the error''s SQLSTATE, message, detail and hint (NULL without one).';
COMMENT ON TYPE @extschema@.ratelimit_proxy_entry IS
'A row of ratelimit_proxy_limit_all: ratelimit_limit_all''s row (NULL after an error), and the error''s SQLSTATE, message, detail and hint (NULL without one).';

COMMENT ON FUNCTION @extschema@.ratelimit_hash(text, text) IS
'The hash routing (name, key): the first 8 hex digits of md5(octet_length(name) || '':'' || name || coalesce(''='' || key, '''')) as a signed 32-bit integer. A NULL key and '''' differ. The partition is hash & (partitions - 1).';
COMMENT ON FUNCTION @extschema@.ratelimit_partitions() IS
'The number of partitions of the PL/Proxy cluster ratelimit (the pN options of its foreign server); 0 if it is not configured.';
COMMENT ON FUNCTION @extschema@.ratelimit_partition(text, text) IS
'The partition (0 .. partitions - 1, the N of option pN) that holds limit (name, key): ratelimit_hash(name, key) & (ratelimit_partitions() - 1).';
COMMENT ON FUNCTION @extschema@.ratelimit_limit_all_hash(jsonb) IS
'Where the router''s ratelimit_limit_all runs: the hash of its elements'' partition; SQLSTATE 0A000 when the elements are on different partitions.';

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit(integer, text, text, jsonb, double precision, boolean, boolean, text) IS
'The partition''s ratelimit_proxy_limit on the partition of hash (ratelimit_hash(name, key)): ratelimit_limit there with ratelimit.error_format set to error_format (NULL: the partition''s own), its error returned in the error_* columns; what the router''s ratelimit_limit runs.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_check(integer, text, text, jsonb, double precision, boolean, boolean, text) IS
'The partition''s ratelimit_proxy_check on the partition of hash (ratelimit_hash(name, key)): ratelimit_check there with ratelimit.error_format set to error_format (NULL: the partition''s own), its error returned in the error_* columns; what the router''s ratelimit_check runs.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit_all(integer, jsonb, boolean, text) IS
'The partition''s ratelimit_proxy_limit_all on the partition of hash (ratelimit_limit_all_hash(limits): its elements''): ratelimit_limit_all there with ratelimit.error_format set to error_format (NULL: the partition''s own), its rows, or one row carrying its error in the error_* columns; what the router''s ratelimit_limit_all runs.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_value(integer, text, text, jsonb) IS
'The partition''s ratelimit_proxy_value on the partition of hash (ratelimit_hash(name, key)): ratelimit_value there, its error returned in the error_* columns; what the router''s ratelimit_value runs.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_reset(integer, text, text) IS
'The partition''s ratelimit_proxy_reset on the partition of hash (ratelimit_hash(name, key)): ratelimit_reset there, its error returned in the error_* columns; what the router''s ratelimit_reset runs. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_refund(integer, text, text, double precision, jsonb) IS
'The partition''s ratelimit_proxy_refund on the partition of hash (ratelimit_hash(name, key)): ratelimit_refund there, its error returned in the error_* columns; what the router''s ratelimit_refund runs. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_headers(integer, text, @extschema@.ratelimit_result, jsonb, text) IS
'The partition''s ratelimit_proxy_headers on the partition of hash (ratelimit_hash(name, key)): ratelimit_headers there, its error returned in the error_* columns; what the router''s ratelimit_headers runs.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_override(integer, text, text, jsonb) IS
'The partition''s ratelimit_proxy_override on the partition of hash (ratelimit_hash(name, key)): ratelimit_override there, its error returned in the error_* columns; what the router''s ratelimit_override runs. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_unoverride(integer, text, text) IS
'The partition''s ratelimit_proxy_unoverride on the partition of hash (ratelimit_hash(name, key)): ratelimit_unoverride there, its error returned in the error_* columns; what the router''s ratelimit_unoverride runs. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_define(text, jsonb) IS
'The partition''s ratelimit_proxy_define on every partition at once, one row per partition, an error returned in the error_* columns; what the router''s ratelimit_define runs. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_undefine(text) IS
'The partition''s ratelimit_proxy_undefine on every partition at once, one row per partition, an error returned in the error_* columns; what the router''s ratelimit_undefine runs. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_cleanup() IS
'The partition''s ratelimit_proxy_cleanup on every partition at once, one row per partition, an error returned in the error_* columns; what the router''s ratelimit_cleanup runs. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_stats_reset() IS
'The partition''s ratelimit_proxy_stats_reset on every partition at once, one row per partition, an error returned in the error_* columns; what the router''s ratelimit_stats_reset runs. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_stats() IS
'The rows of ratelimit_stats of every partition, each with its server (the postmaster''s start time and port); what the router''s ratelimit_stats view sums.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_status() IS
'The rows of ratelimit_status of every partition, each with its server (the postmaster''s start time and port) and database; what the router''s ratelimit_status view shows. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_simulate(jsonb, timestamptz[], double precision[], text, text) IS
'The partition''s ratelimit_proxy_simulate on any partition: ratelimit_simulate there, its error returned in the error_* columns of one row; what the router''s ratelimit_simulate runs.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_raise(text, text, text, text) IS
'Raises the error a partition returned as data (from the partition''s ratelimit_proxy_* functions): SQLSTATE state with its message, detail and hint (each left out when NULL); does nothing when state is NULL.';
COMMENT ON FUNCTION @extschema@.ratelimit_proxy_result(record) IS
'The answer of a routed ratelimit_proxy_limit or ratelimit_proxy_check: its ratelimit_result, or the partition''s error (error_state, error_message, error_detail, error_hint) raised.';

COMMENT ON FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) IS
'Routed ratelimit_limit: consumes count tokens of limit (name, key) on the partition that holds it (ratelimit_partition(name, key)), in a transaction of its own there (committed before the answer returns, whatever the caller''s transaction does). throws => true raises SQLSTATE PT429, or PGRST with ratelimit.error_format = postgrest in the router session, as one node does; the partition''s errors are raised as the partition raised them, and cost no reconnect.';
COMMENT ON FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean) IS
'Routed ratelimit_check: what ratelimit_limit would answer, from the committed state of the partition that holds (name, key); writes nothing. throws => true raises as ratelimit_limit does.';
COMMENT ON FUNCTION @extschema@.ratelimit_limit_all(jsonb, boolean) IS
'Routed ratelimit_limit_all: several limits all or nothing, on the one partition that holds them all; SQLSTATE 0A000 (and nothing consumed) when they are on different partitions. throws => true raises as ratelimit_limit does.';
COMMENT ON FUNCTION @extschema@.ratelimit_value(text, text, jsonb) IS
'Routed ratelimit_value: one row, the tokens available now of limit (name, key) on its partition, and the instant they hold for; the partition''s errors are raised as the partition raised them, and cost no reconnect.';
COMMENT ON FUNCTION @extschema@.ratelimit_reset(text, text) IS
'Routed ratelimit_reset: forgets the state of limit (name, key) on its partition; true if there was any. Needs EXECUTE on ratelimit_proxy_reset too. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_refund(text, text, double precision, jsonb) IS
'Routed ratelimit_refund: gives count tokens back to limit (name, key) on its partition, capped at capacity; the partition''s errors are raised as the partition raised them. Needs EXECUTE on ratelimit_proxy_refund too. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb, text) IS
'Routed ratelimit_headers: the HTTP response headers for a result of limit (name, key) (the key''s override, else config inline, else the definition), computed on the partition of (name, key), which holds that key''s override. A NULL key: the partition of the name''s global limit.';
COMMENT ON FUNCTION @extschema@.ratelimit_override(text, text, jsonb) IS
'Routed ratelimit_override: stores config for key (name, key) on the partition that holds it (committed there before the call returns); an invalid config raises the partition''s error. Needs EXECUTE on ratelimit_proxy_override too. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_unoverride(text, text) IS
'Routed ratelimit_unoverride: removes the override of key (name, key) on its partition; true if there was one. Needs EXECUTE on ratelimit_proxy_unoverride too. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_define(text, jsonb) IS
'Routed ratelimit_define: validates and stores the named limit on every partition (each in its own transaction; after an error, such as a partition down, run it again); an invalid config raises the partition''s error (22023), and costs no reconnect. Needs EXECUTE on ratelimit_proxy_define too. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_undefine(text) IS
'Routed ratelimit_undefine: removes the named limit on every partition; true if any partition had it. Needs EXECUTE on ratelimit_proxy_undefine too. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_cleanup() IS
'Routed ratelimit_cleanup: deletes idle state rows on every partition; returns how many in all. Needs EXECUTE on ratelimit_proxy_cleanup too. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_stats_reset() IS
'Routed ratelimit_stats_reset: empties ratelimit_stats on every partition. Needs EXECUTE on ratelimit_proxy_stats_reset too. Owner only unless granted.';
COMMENT ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[], text, text) IS
'Routed ratelimit_simulate: one row per arrival, the answer ratelimit_limit(name, key, config, count) gives a key never used with the clock at that arrival, computed by any partition (it touches no limit); its errors raised as the partition raised them.';
COMMENT ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[]) IS
'Routed ratelimit_simulate(config, arrivals, counts): one row per arrival, the answer ratelimit_limit gives a key never used with the clock at that arrival (windows without start on whole periods from the Unix epoch), computed by any partition; its errors raised as the partition raised them.';

COMMENT ON VIEW @extschema@.ratelimit_stats IS
'Routed ratelimit_stats: one row per limit name, the counters of every partition''s server summed (each server once); stats_reset is the latest reset of any of them. Each partition counts the calls it decided; empty where a partition''s server has no shared memory for them (shared_preload_libraries before PostgreSQL 17).';
COMMENT ON VIEW @extschema@.ratelimit_status IS
'Routed ratelimit_status: the stored limits of every partition (table rows and memory entries; each partition database has its own). Needs EXECUTE on ratelimit_proxy_status too. Owner only unless granted.';
