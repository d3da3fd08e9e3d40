\set ratelimit_setup_echo :ECHO
\set ECHO none
-- The preamble of the regression files in sql/ that test errors, and of
-- test/memcheck/every_function.sql: read with \i test/sql_support/setup.sql
-- (a path from the top of the source tree, where make installcheck runs
-- pg_regress and scripts/memcheck.sh runs psql) at the top of a file, and
-- again after a \c. Not a test itself: pg_regress runs sql/*.sql only. Its
-- lines are not echoed into the expected output (ECHO none, then back to
-- what it was).
--
-- The session's time zone, for timestamps in the output; and
-- pg_temp.try(query), which runs a statement and answers 'ok' or
-- 'SQLSTATE: message'.
SET timezone = 'UTC';
CREATE FUNCTION pg_temp.try(query text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE query;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
\set ECHO :ratelimit_setup_echo
