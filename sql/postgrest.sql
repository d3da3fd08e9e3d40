-- The PostgREST/Supabase db-pre-request hook of docs/integrations.md, run the way PostgREST
-- runs it: as the request role, with request.* settings of the transaction.
SET timezone = 'UTC';
SET ratelimit.now = '2026-01-01 00:00:00+00';
-- A PGRST error's message and detail are JSON; other messages become JSON strings.
CREATE FUNCTION pg_temp.error_of(query text, OUT state text, OUT message jsonb, OUT detail jsonb)
LANGUAGE plpgsql AS $$
DECLARE
  message_text text;
  detail_text text;
BEGIN
  EXECUTE query;
  state := 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message_text = MESSAGE_TEXT, detail_text = PG_EXCEPTION_DETAIL;
  IF state = 'PGRST' THEN
    message := message_text::jsonb;
    detail := detail_text::jsonb;
  ELSE
    message := to_jsonb(message_text);
  END IF;
END $$;
CREATE ROLE pgrst_anon;
CREATE ROLE pgrst_authenticated;
-- The extension in a schema the API does not expose.
DROP EXTENSION ratelimit;
CREATE SCHEMA private;
CREATE EXTENSION ratelimit SCHEMA private;
SELECT private.ratelimit_define('api_per_user', '{"kind": "token bucket", "rate": 3, "period": "1 minute"}');
SELECT private.ratelimit_define('api_per_ip',   '{"kind": "sliding window", "rate": 4, "period": "1 minute"}');

CREATE FUNCTION private.limit_request() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = private, pg_catalog, pg_temp AS $$
DECLARE
  headers jsonb := coalesce(nullif(current_setting('request.headers', true), ''), '{}')::jsonb;
  claims  jsonb := coalesce(nullif(current_setting('request.jwt.claims', true), ''), '{}')::jsonb;
  -- Behind a proxy, the first X-Forwarded-For hop is the client (trust only your own proxy).
  ip      text  := coalesce(nullif(trim(split_part(headers ->> 'x-forwarded-for', ',', 1)), ''), 'unknown');
  limits  jsonb := jsonb_build_array(jsonb_build_object('name', 'api_per_ip', 'key', ip));
BEGIN
  -- PostgREST runs GET and HEAD in a read-only transaction, where nothing
  -- can be consumed (25006): limit the requests that write.
  IF current_setting('request.method', true) IN ('GET', 'HEAD') THEN
    RETURN;
  END IF;
  IF claims ->> 'sub' IS NOT NULL THEN  -- never a NULL key: that is the one global limit
    limits := limits || jsonb_build_object('name', 'api_per_user', 'key', claims ->> 'sub');
  END IF;
  PERFORM set_config('ratelimit.error_format', 'postgrest', true);  -- this transaction only
  PERFORM private.ratelimit_limit_all(limits, throws => true);      -- both or neither
END $$;

-- The request roles (Supabase's anon and authenticated; here pgrst_anon and pgrst_authenticated) may run the hook, nothing else there.
REVOKE ALL ON FUNCTION private.limit_request() FROM PUBLIC;
GRANT USAGE ON SCHEMA private TO pgrst_anon, pgrst_authenticated;
GRANT EXECUTE ON FUNCTION private.limit_request() TO pgrst_anon, pgrst_authenticated;

-- One request as PostgREST makes it: a transaction with the request's
-- settings, the role switched, then the hook.
CREATE FUNCTION pg_temp.request(role text, method text, claims text, forwarded_for text,
                                OUT state text, OUT message jsonb, OUT detail jsonb)
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('request.method', method, true);
  PERFORM set_config('request.jwt.claims', claims, true);
  PERFORM set_config('request.headers', jsonb_build_object('x-forwarded-for', forwarded_for)::text, true);
  EXECUTE format('SET LOCAL ROLE %I', role);
  SELECT e.state, e.message, e.detail INTO state, message, detail
  FROM pg_temp.error_of('SELECT private.limit_request()') e;
  RESET ROLE;
END $$;

-- User u1 from two IPs: the per-user bucket (3) refuses the 4th request.
SELECT n, state, detail ->> 'status' AS status, detail -> 'headers' ->> 'Retry-After' AS retry_after,
       detail -> 'headers' ->> 'RateLimit' AS ratelimit
FROM generate_series(1, 4) n,
     pg_temp.request('pgrst_authenticated', 'POST', '{"sub": "u1"}', CASE WHEN n % 2 = 0 THEN '10.0.0.1' ELSE '10.0.0.2, 172.16.0.1' END);
-- The refused request consumed neither limit (all or nothing).
SELECT name, key, value FROM private.ratelimit_status ORDER BY name, key;
-- Anonymous requests have only the per-IP window (4 per minute; u1 used one of 10.0.0.1's).
SELECT n, state, detail ->> 'status' AS status, message ->> 'message' AS message
FROM generate_series(1, 4) n, pg_temp.request('pgrst_anon', 'POST', '', CASE WHEN n > 0 THEN '10.0.0.1' END);
-- The full PGRST error for PostgREST.
SELECT state, jsonb_pretty(message) AS message, jsonb_pretty(detail) AS detail
FROM pg_temp.request('pgrst_anon', 'PATCH', '', '10.0.0.1');
-- GET runs read-only in PostgREST and is not limited by this hook.
BEGIN READ ONLY;
SELECT state FROM pg_temp.request('pgrst_anon', 'GET', '', '10.0.0.1');
COMMIT;
-- The request roles cannot call the limiter's management functions.
SET ROLE pgrst_anon;
SELECT state, message #>> '{}' AS message FROM pg_temp.error_of($$ SELECT private.ratelimit_reset('api_per_ip', '10.0.0.1') $$);
SELECT state, message #>> '{}' AS message FROM pg_temp.error_of($$ SELECT * FROM private.ratelimit_status $$);
RESET ROLE;
-- Back to the extension in public for the other tests.
DROP EXTENSION ratelimit CASCADE;
DROP SCHEMA private CASCADE;
DROP ROLE pgrst_anon;
DROP ROLE pgrst_authenticated;
CREATE EXTENSION ratelimit;
RESET ratelimit.now;
