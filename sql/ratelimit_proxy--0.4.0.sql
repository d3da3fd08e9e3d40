/* ratelimit_proxy 0.4.0: the ratelimit 0.4.0 API in a router database, routed to partitions with PL/Proxy */

\echo Use "CREATE EXTENSION ratelimit_proxy" to load this file. \quit

-- The router holds no limit state. Every function below runs on the
-- partitions of the PL/Proxy cluster 'ratelimit' (CREATE SERVER ratelimit
-- FOREIGN DATA WRAPPER plproxy OPTIONS (p0 '...', p1 '...', ...)), each an
-- ordinary database with CREATE EXTENSION ratelimit, in a schema of the same
-- name as this extension's: PL/Proxy calls the function of the same
-- schema-qualified name there. Each remote call runs in its own transaction
-- on its partition and commits there before the router sees its answer.

CREATE TYPE @extschema@.ratelimit_result AS (
    ok          boolean,
    retry_after double precision,
    retry_at    timestamptz,
    remaining   double precision,
    reset_after double precision
);

COMMENT ON TYPE @extschema@.ratelimit_result IS
'The answer of a routed call, as on the partitions: ok: granted; retry_after/retry_at: when to retry (refused) or run the reserved work (NULL when granted now); remaining: tokens left (negative when reserved); reset_after: seconds until full again.';

-- The partition hash. Stable across PostgreSQL versions and platforms (md5
-- is fixed by RFC 1321; hashtext and hashtextextended are not promised to
-- be): the first 32 bits of md5 over an injective encoding of (name, key),
-- read big-endian as a signed int4. A NULL key (the global limit) and ''
-- encode differently; a NULL name (an error on the partition) hashes as ''.
-- PL/Proxy takes the partition as hash & (partitions - 1).
CREATE FUNCTION @extschema@.ratelimit_hash(name text, key text DEFAULT NULL)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ('x' || left(md5(octet_length(coalesce(name, '')) || ':' || coalesce(name, '')
                        || coalesce('=' || key, '')), 8))::bit(32)::integer;

COMMENT ON FUNCTION @extschema@.ratelimit_hash(text, text) IS
'The hash routing (name, key): the first 8 hex digits of md5(octet_length(name) || '':'' || name || coalesce(''='' || key, '''')) as a signed 32-bit integer. A NULL key and '''' differ. The partition is hash & (partitions - 1).';

-- How many partitions the cluster has: the pN options of server ratelimit.
CREATE FUNCTION @extschema@.ratelimit_partitions()
RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT count(*)::integer
    FROM pg_catalog.pg_foreign_server AS s
    CROSS JOIN LATERAL pg_catalog.pg_options_to_table(s.srvoptions) AS o
    WHERE s.srvname = 'ratelimit' AND o.option_name ~ '^p[0-9]+$';
END;

COMMENT ON FUNCTION @extschema@.ratelimit_partitions() IS
'The number of partitions of the PL/Proxy cluster ratelimit (the pN options of its foreign server); 0 if it is not configured.';

-- Which partition holds a limit: what PL/Proxy does with ratelimit_hash.
CREATE FUNCTION @extschema@.ratelimit_partition(name text, key text DEFAULT NULL)
RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT @extschema@.ratelimit_hash(name, key) & (@extschema@.ratelimit_partitions() - 1);
END;

COMMENT ON FUNCTION @extschema@.ratelimit_partition(text, text) IS
'The partition (0 .. partitions - 1, the N of option pN) that holds limit (name, key): ratelimit_hash(name, key) & (ratelimit_partitions() - 1).';

CREATE FUNCTION @extschema@.ratelimit_limit(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_hash(name, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) IS
'Routed ratelimit_limit: consumes count tokens of limit (name, key) on the partition that holds it, in a transaction of its own there (committed before the answer returns, whatever the caller''s transaction does). throws => true raises SQLSTATE PT429.';

CREATE FUNCTION @extschema@.ratelimit_check(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_hash(name, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean) IS
'Routed ratelimit_check: what ratelimit_limit would answer, from the committed state of the partition that holds (name, key); writes nothing.';

CREATE FUNCTION @extschema@.ratelimit_value(name text, key text DEFAULT NULL, config jsonb DEFAULT NULL)
RETURNS TABLE (value double precision, ts timestamptz)
LANGUAGE plproxy VOLATILE ROWS 1
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_hash(name, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_value(text, text, jsonb) IS
'Routed ratelimit_value: one row, the tokens available now of limit (name, key) on its partition, and the instant they hold for.';

CREATE FUNCTION @extschema@.ratelimit_reset(name text, key text DEFAULT NULL)
RETURNS boolean
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_hash(name, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_reset(text, text) IS
'Routed ratelimit_reset: forgets the state of limit (name, key) on its partition; true if there was any. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_refund(
    name text,
    key text DEFAULT NULL,
    count double precision DEFAULT 1,
    config jsonb DEFAULT NULL)
RETURNS @extschema@.ratelimit_result
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_hash(name, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_refund(text, text, double precision, jsonb) IS
'Routed ratelimit_refund: gives count tokens back to limit (name, key) on its partition, capped at capacity. Owner only unless granted.';

-- Headers need the limit's config, which every partition has: the one of
-- the name's global limit answers.
CREATE FUNCTION @extschema@.ratelimit_headers(
    name text,
    result @extschema@.ratelimit_result,
    config jsonb DEFAULT NULL)
RETURNS jsonb
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_hash(name, NULL);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_headers(text, @extschema@.ratelimit_result, jsonb) IS
'Routed ratelimit_headers: the HTTP response headers for a result of limit name (config inline, else defined), computed on the partition of (name, NULL).';

-- RUN ON ALL needs a set-returning function: one row per partition.
CREATE FUNCTION @extschema@.ratelimit_proxy_define(name text, config jsonb)
RETURNS SETOF boolean
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT true AS defined FROM @extschema@.ratelimit_define(name, config);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_define(text, jsonb) IS
'ratelimit_define on every partition at once, one row per partition; what the router''s ratelimit_define runs. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_define(name text, config jsonb)
RETURNS void
LANGUAGE sql VOLATILE
BEGIN ATOMIC
    SELECT count(*) FROM @extschema@.ratelimit_proxy_define(name, config);
END;

COMMENT ON FUNCTION @extschema@.ratelimit_define(text, jsonb) IS
'Routed ratelimit_define: validates and stores the named limit on every partition (each in its own transaction; after an error, such as a partition down, run it again). Needs EXECUTE on ratelimit_proxy_define too. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_proxy_undefine(name text)
RETURNS SETOF boolean
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT u AS undefined FROM @extschema@.ratelimit_undefine(name) AS u;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_undefine(text) IS
'ratelimit_undefine on every partition at once, one row per partition; what the router''s ratelimit_undefine runs. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_undefine(name text)
RETURNS boolean
LANGUAGE sql VOLATILE
BEGIN ATOMIC
    SELECT coalesce(bool_or(u), false) FROM @extschema@.ratelimit_proxy_undefine(name) AS u;
END;

COMMENT ON FUNCTION @extschema@.ratelimit_undefine(text) IS
'Routed ratelimit_undefine: removes the named limit on every partition; true if any partition had it. Needs EXECUTE on ratelimit_proxy_undefine too. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_proxy_cleanup()
RETURNS SETOF bigint
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT n AS deleted FROM @extschema@.ratelimit_cleanup() AS n;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_cleanup() IS
'ratelimit_cleanup on every partition at once, one row per partition with its count; what the router''s ratelimit_cleanup runs. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_cleanup()
RETURNS bigint
LANGUAGE sql VOLATILE
BEGIN ATOMIC
    SELECT coalesce(sum(n), 0)::bigint FROM @extschema@.ratelimit_proxy_cleanup() AS n;
END;

COMMENT ON FUNCTION @extschema@.ratelimit_cleanup() IS
'Routed ratelimit_cleanup: deletes idle state rows on every partition; returns how many in all. Needs EXECUTE on ratelimit_proxy_cleanup too. Owner only unless granted.';

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

COMMENT ON FUNCTION @extschema@.ratelimit_limit_all_hash(jsonb) IS
'Where the router''s ratelimit_limit_all runs: the hash of its elements'' partition; SQLSTATE 0A000 when the elements are on different partitions.';

CREATE FUNCTION @extschema@.ratelimit_limit_all(limits jsonb, throws boolean DEFAULT false)
RETURNS TABLE (name text, key text, ok boolean, retry_after double precision, retry_at timestamptz,
               remaining double precision, reset_after double precision)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON @extschema@.ratelimit_limit_all_hash(limits);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_limit_all(jsonb, boolean) IS
'Routed ratelimit_limit_all: several limits all or nothing, on the one partition that holds them all; SQLSTATE 0A000 (and nothing consumed) when they are on different partitions.';

-- The same rights as the extension's: PUBLIC may consume, check and read
-- limits; changing them is the owner's. The partitions check again, as the
-- role of the user mapping.
REVOKE ALL ON FUNCTION @extschema@.ratelimit_reset(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_refund(text, text, double precision, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_define(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_define(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_undefine(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_undefine(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_cleanup() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_proxy_cleanup() FROM PUBLIC;
