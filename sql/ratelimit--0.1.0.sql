/* ratelimit 0.1.0: transactional rate limits locked inside the caller's transaction */

\echo Use "CREATE EXTENSION ratelimit" to load this file. \quit

-- One row per limit (name, key, shard): the article's two numbers, value and
-- ts, plus prev, the sliding window's previous-window count (NULL otherwise).
-- A NULL key is the one global limit of a name; '' is an ordinary key.
-- COLLATE "C" makes (name, key, shard) a byte order: the canonical lock order.
CREATE TABLE @extschema@.ratelimit_state (
    name  text COLLATE "C" NOT NULL,
    key   text COLLATE "C",
    shard smallint NOT NULL DEFAULT 0 CHECK (shard >= 0),
    value double precision NOT NULL,
    ts    timestamptz NOT NULL,
    prev  double precision,
    CONSTRAINT ratelimit_state_name_key_shard UNIQUE (name, key, shard)
);
-- Unique NULL keys (UNIQUE treats NULLs as distinct before PostgreSQL 15).
CREATE UNIQUE INDEX ratelimit_state_global ON @extschema@.ratelimit_state (name, shard) WHERE key IS NULL;

COMMENT ON TABLE @extschema@.ratelimit_state IS
'Rate limit state: value (tokens, or the current window''s count for a sliding window) at ts, per (name, key, shard). Managed by the ratelimit functions.';

-- Named limits, so calls can omit their config.
CREATE TABLE @extschema@.ratelimit_definition (
    name   text COLLATE "C" PRIMARY KEY,
    config jsonb NOT NULL
);

COMMENT ON TABLE @extschema@.ratelimit_definition IS
'Named rate limit configs stored by ratelimit_define(); an inline config wins over these.';

-- App roles must not read or tamper with limits: only the functions may.
REVOKE ALL ON @extschema@.ratelimit_state FROM PUBLIC;
REVOKE ALL ON @extschema@.ratelimit_definition FROM PUBLIC;

-- pg_dump keeps the rows of both tables (state and named limits survive a restore).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.ratelimit_state', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.ratelimit_definition', '');

CREATE TYPE @extschema@.ratelimit_result AS (
    ok          boolean,
    retry_after double precision,
    retry_at    timestamptz,
    remaining   double precision,
    reset_after double precision
);

COMMENT ON TYPE @extschema@.ratelimit_result IS
'ok: granted; retry_after/retry_at: when to retry (refused) or run the reserved work (NULL when granted now); remaining: tokens left (negative when reserved); reset_after: seconds until full again.';

CREATE FUNCTION @extschema@.ratelimit_limit(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
AS 'MODULE_PATHNAME', 'ratelimit_limit'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) IS
'Consumes count tokens of limit (name, key) inside the calling transaction: rolls back with it. A refusal writes nothing; throws => true raises SQLSTATE PT429 instead.';

CREATE FUNCTION @extschema@.ratelimit_check(
    name text,
    key text DEFAULT NULL,
    config jsonb DEFAULT NULL,
    count double precision DEFAULT 1,
    reserve boolean DEFAULT false,
    throws boolean DEFAULT false)
RETURNS @extschema@.ratelimit_result
AS 'MODULE_PATHNAME', 'ratelimit_check'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean) IS
'Answers what ratelimit_limit would answer, from the latest committed state, without locking or writing anything.';

CREATE FUNCTION @extschema@.ratelimit_reset(name text, key text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'ratelimit_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION @extschema@.ratelimit_reset(text, text) IS
'Forgets the state of limit (name, key), so it is full again; true if there was any state. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_value(name text, key text DEFAULT NULL, config jsonb DEFAULT NULL)
RETURNS TABLE (value double precision, ts timestamptz)
AS 'MODULE_PATHNAME', 'ratelimit_value'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER ROWS 1
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION @extschema@.ratelimit_value(text, text, jsonb) IS
'One row: the tokens available now without consuming, and the instant they hold for (token bucket: now; window kinds: the current window''s start).';

CREATE FUNCTION @extschema@.ratelimit_define(name text, config jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'ratelimit_define'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION @extschema@.ratelimit_define(text, jsonb) IS
'Validates and stores (or replaces) the config of a named limit, so calls can omit config. Owner only unless granted.';

CREATE FUNCTION @extschema@.ratelimit_undefine(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'ratelimit_undefine'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION @extschema@.ratelimit_undefine(text) IS
'Removes a named limit''s config (its state stays until reset); true if it was defined. Owner only unless granted.';

-- PUBLIC may consume, check and read limits; changing them is the owner's.
REVOKE ALL ON FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_value(text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_reset(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_define(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.ratelimit_undefine(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_limit(text, text, jsonb, double precision, boolean, boolean) TO PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_check(text, text, jsonb, double precision, boolean, boolean) TO PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.ratelimit_value(text, text, jsonb) TO PUBLIC;
