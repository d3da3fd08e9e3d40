-- The pattern of examples/plproxy: the app's own function, routed by the
-- hash of its limit's (name, key), runs on the partition that holds that
-- limit and the user's rows, and consumes the limit there in one
-- transaction with its insert. examples/plproxy/partition.sql is loaded in
-- every partition, examples/plproxy/router.sql in the router.
CREATE FUNCTION partition_messages()
RETURNS TABLE (db text, user_id text, body text)
LANGUAGE plproxy AS $$
    CLUSTER 'ratelimit';
    RUN ON ALL;
    SELECT current_database()::text AS db, m.user_id, m.body FROM public.messages AS m;
$$;
CREATE FUNCTION pg_temp.outcome(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END;
$$;
SET client_min_messages = warning;

SELECT ratelimit_define('sendMessage', '{"kind": "token bucket", "rate": 2, "period": "1 hour"}');
SELECT ratelimit_partition('sendMessage', 'alice') AS alice, ratelimit_partition('sendMessage', 'bob') AS bob;

-- Granted: the message is stored and the token spent, together.
SELECT send_message('alice', 'hello') IS NOT NULL AS sent;
SELECT send_message('alice', 'again') IS NOT NULL AS sent;
-- Refused: PT429 from the partition; nothing is stored.
SELECT pg_temp.outcome($$SELECT send_message('alice', 'one too many')$$) AS refused;
SELECT * FROM user_messages('alice');
SELECT value FROM ratelimit_value('sendMessage', 'alice');

-- The insert fails after the limit granted (an empty body violates the
-- table's CHECK): the whole transaction on the partition rolls back, the
-- token with it.
SELECT pg_temp.outcome($$SELECT send_message('bob', '')$$) AS failed_insert;
SELECT value FROM ratelimit_value('sendMessage', 'bob');
SELECT count(*) AS bob_messages FROM user_messages('bob');
SELECT send_message('bob', 'hi') IS NOT NULL AS sent;
SELECT value FROM ratelimit_value('sendMessage', 'bob');

-- Each user's messages and limit row are on the same one partition.
SELECT m.db, m.user_id, count(*) AS messages,
       m.db = 'rl_p' || ratelimit_partition('sendMessage', m.user_id) AS with_its_limit
FROM partition_messages() AS m GROUP BY 1, 2 ORDER BY 2;

SELECT ratelimit_undefine('sendMessage');
DROP FUNCTION partition_messages();
