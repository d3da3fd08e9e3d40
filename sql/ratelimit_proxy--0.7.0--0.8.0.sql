/* ratelimit_proxy 0.7.0 -> 0.8.0: ratelimit_simulate, answered by any partition */

\echo Use "ALTER EXTENSION ratelimit_proxy UPDATE TO '0.8.0'" to load this file. \quit

-- ratelimit_simulate touches no limit, so any partition can answer it:
-- the router sends it to one at random (RUN ON ANY) through the
-- partition's ratelimit_proxy_simulate (ratelimit 0.8.0), which returns an
-- error as data, and raises that error itself, as the partition would
-- have: the connection stays. Update the partitions first.
CREATE FUNCTION @extschema@.ratelimit_proxy_simulate(
    config jsonb, arrivals timestamptz[], counts double precision[], name text, key text)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision,
               error_state text, error_message text, error_detail text, error_hint text)
LANGUAGE plproxy VOLATILE
AS $$
    CLUSTER 'ratelimit';
    RUN ON ANY;
    SELECT * FROM @extschema@.ratelimit_proxy_simulate(config, arrivals, counts, name, key);
$$;

COMMENT ON FUNCTION @extschema@.ratelimit_proxy_simulate(jsonb, timestamptz[], double precision[], text, text) IS
'The partition''s ratelimit_proxy_simulate on any partition: ratelimit_simulate there, its error returned in the error_* columns of one row; what the router''s ratelimit_simulate runs.';

-- The router's ratelimit_simulate: the same arguments and rows as one
-- node's, its errors raised with the partition's SQLSTATE, message, detail
-- and hint. VOLATILE: it asks another server.
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

COMMENT ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[], text, text) IS
'Routed ratelimit_simulate: one row per arrival, the answer ratelimit_limit(name, key, config, count) gives a key never used with the clock at that arrival, computed by any partition (it touches no limit); its errors raised as the partition raised them.';

-- The three-argument form, as on a node: windows on whole periods from the
-- Unix epoch.
CREATE FUNCTION @extschema@.ratelimit_simulate(
    config jsonb,
    arrivals timestamptz[],
    counts double precision[] DEFAULT NULL)
RETURNS TABLE (at timestamptz, count double precision, ok boolean,
               remaining double precision, retry_after double precision)
LANGUAGE sql VOLATILE
AS $$ SELECT * FROM @extschema@.ratelimit_simulate(config, arrivals, counts, NULL::text, NULL::text) $$;

COMMENT ON FUNCTION @extschema@.ratelimit_simulate(jsonb, timestamptz[], double precision[]) IS
'Routed ratelimit_simulate(config, arrivals, counts): one row per arrival, the answer ratelimit_limit gives a key never used with the clock at that arrival (windows without start on whole periods from the Unix epoch), computed by any partition; its errors raised as the partition raised them.';
