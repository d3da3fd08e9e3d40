/* ratelimit_proxy 0.6.0 -> 0.7.0: the partition's errors come back as data; a lean routed call */

\echo Use "ALTER EXTENSION ratelimit_proxy UPDATE TO '0.7.0'" to load this file. \quit

-- PL/Proxy closes its connection to a partition whenever the remote
-- statement raises an error, so with 0.6.0 every refusal with
-- throws => true and every bad argument cost the router session a new
-- partition backend (and a NOTICE "PL/Proxy: dropping stale conn"). From
-- 0.7.0 the router's ratelimit_limit, ratelimit_check and
-- ratelimit_limit_all call the partition's ratelimit_proxy_limit, _check
-- and _limit_all (ratelimit 0.7.0), which make the call and return an
-- error it raises as data (SQLSTATE, message, detail, hint); the router
-- raises it itself, as the partition would have: the connection stays.
-- Update the partitions first (ALTER EXTENSION ratelimit UPDATE on each):
-- this router needs ratelimit 0.7.0 there, and the 0.6.0 router works over
-- partitions at 0.6.0 and 0.7.0 alike.

-- The routed calls: PL/Proxy functions of the partition's function's name,
-- with the partition's hash as a first argument (RUN ON hash: the caller
-- computes it, so PL/Proxy runs no hash query of its own, which cost more
-- than the rest of its work), and a statement calling the partition's
-- function with the other arguments, one short statement per call.
-- error_format is the router session's ratelimit.error_format, sent as an
-- argument (PL/Proxy sends no settings).
DROP FUNCTION @extschema@.ratelimit_proxy_limit(text, text, jsonb, double precision, boolean, boolean, text);
DROP FUNCTION @extschema@.ratelimit_proxy_check(text, text, jsonb, double precision, boolean, boolean, text);
DROP FUNCTION @extschema@.ratelimit_proxy_limit_all(jsonb, boolean, text);
DROP FUNCTION @extschema@.ratelimit_proxy_raise_remote(text, text, text, text, text);

CREATE FUNCTION @extschema@.ratelimit_proxy_limit(
    hash integer, name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text,
    OUT ok boolean, OUT retry_after double precision, OUT retry_at timestamptz,
    OUT remaining double precision, OUT reset_after double precision,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT * FROM @extschema@.ratelimit_proxy_limit(name, key, config, count, reserve, throws, error_format);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit(integer, text, text, jsonb, double precision, boolean, boolean, text) IS
'The partition''s ratelimit_proxy_limit on the partition of hash (ratelimit_hash(name, key)): ratelimit_limit there with ratelimit.error_format set to error_format (NULL: the partition''s own), its error returned in the error_* columns; what the router''s ratelimit_limit runs.';

CREATE FUNCTION @extschema@.ratelimit_proxy_check(
    hash integer, name text, key text, config jsonb, count double precision, reserve boolean, throws boolean,
    error_format text,
    OUT ok boolean, OUT retry_after double precision, OUT retry_at timestamptz,
    OUT remaining double precision, OUT reset_after double precision,
    OUT error_state text, OUT error_message text, OUT error_detail text, OUT error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT * FROM @extschema@.ratelimit_proxy_check(name, key, config, count, reserve, throws, error_format);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_check(integer, text, text, jsonb, double precision, boolean, boolean, text) IS
'The partition''s ratelimit_proxy_check on the partition of hash (ratelimit_hash(name, key)): ratelimit_check there with ratelimit.error_format set to error_format (NULL: the partition''s own), its error returned in the error_* columns; what the router''s ratelimit_check runs.';

CREATE FUNCTION @extschema@.ratelimit_proxy_limit_all(hash integer, limits jsonb, throws boolean, error_format text)
RETURNS TABLE (name text, key text, ok boolean, retry_after double precision, retry_at timestamptz,
               remaining double precision, reset_after double precision,
               error_state text, error_message text, error_detail text, error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON hash;
    SELECT * FROM @extschema@.ratelimit_proxy_limit_all(limits, throws, error_format);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_limit_all(integer, jsonb, boolean, text) IS
'The partition''s ratelimit_proxy_limit_all on the partition of hash (ratelimit_limit_all_hash(limits): its elements''): ratelimit_limit_all there with ratelimit.error_format set to error_format (NULL: the partition''s own), its rows, or one row carrying its error in the error_* columns; what the router''s ratelimit_limit_all runs.';

-- Raises the error a partition returned as data, as the partition raised
-- it: SQLSTATE, message, detail and hint (absent when NULL).
CREATE FUNCTION @extschema@.ratelimit_proxy_raise(state text, message text, detail text, hint text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- RAISE takes no NULL option, and an empty one would show: leave it out.
    IF detail IS NULL AND hint IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = state, MESSAGE = message;
    ELSIF hint IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = state, MESSAGE = message, DETAIL = detail;
    ELSIF detail IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = state, MESSAGE = message, HINT = hint;
    END IF;
    RAISE EXCEPTION USING ERRCODE = state, MESSAGE = message, DETAIL = detail, HINT = hint;
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_raise(text, text, text, text) IS
'Raises the error a partition returned as data (from ratelimit_proxy_limit, _check, _limit_all): SQLSTATE state with its message, detail and hint (each left out when NULL).';

-- The router's ratelimit_limit, ratelimit_check and ratelimit_limit_all:
-- the routed call, and its error raised here. No exception block (it
-- would cost a subtransaction per call): an error PL/Proxy raises (a
-- partition that cannot be reached, a connection that ended) reaches the
-- caller as PL/Proxy raised it, naming the partition.
CREATE OR REPLACE FUNCTION @extschema@.ratelimit_limit(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_limit(@extschema@.ratelimit_hash(name, key), name, key, config, count,
        reserve, throws,
        NULLIF(pg_catalog.current_setting('ratelimit.error_format', true), ''));
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;
    RETURN ROW(answer.ok, answer.retry_after, answer.retry_at, answer.remaining, answer.reset_after);
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) IS
'Routed ratelimit_limit: consumes count tokens of limit (name, key) on the partition that holds it, in a transaction of its own there (committed before the answer returns, whatever the caller''s transaction does). throws => true raises SQLSTATE PT429, or PGRST with ratelimit.error_format = postgrest in the router session, as one node does; the partition''s errors are raised as the partition raised them, and cost no reconnect.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_check(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    answer record;
BEGIN
    answer := @extschema@.ratelimit_proxy_check(@extschema@.ratelimit_hash(name, key), name, key, config, count,
        reserve, throws,
        NULLIF(pg_catalog.current_setting('ratelimit.error_format', true), ''));
    IF answer.error_state IS NOT NULL THEN
        PERFORM @extschema@.ratelimit_proxy_raise(answer.error_state, answer.error_message,
                                                  answer.error_detail, answer.error_hint);
    END IF;
    RETURN ROW(answer.ok, answer.retry_after, answer.retry_at, answer.remaining, answer.reset_after);
END;
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean) IS
'Routed ratelimit_check: what ratelimit_limit would answer, from the committed state of the partition that holds (name, key); writes nothing. throws => true raises as ratelimit_limit does.';

CREATE OR REPLACE FUNCTION @extschema@.ratelimit_limit_all(limits jsonb, throws boolean DEFAULT false)
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

COMMENT ON FUNCTION @extschema@.ratelimit_limit_all(jsonb, boolean) IS
'Routed ratelimit_limit_all: several limits all or nothing, on the one partition that holds them all; SQLSTATE 0A000 (and nothing consumed) when they are on different partitions. throws => true raises as ratelimit_limit does.';
