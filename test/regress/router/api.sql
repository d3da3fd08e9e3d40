-- The user-facing API of an extension, as its catalog says: every function
-- (name, arguments with names, types and defaults, result, whether PUBLIC
-- may execute it) and every view and composite type (columns with types,
-- whether PUBLIC may read it). Trigger functions and the functions the
-- extension's views read their rows from (internal row helpers) are left
-- out. scripts/plproxy-test.sh loads it into every partition database and
-- the router, and test/regress/router/sql/router.sql compares ratelimit on the
-- partitions with ratelimit_proxy on the router.
CREATE FUNCTION public.extension_api(extension name)
RETURNS TABLE (kind text, object text, signature text, result text, public_access boolean)
LANGUAGE sql STABLE
SET search_path = pg_catalog, public
AS $$
    WITH ext AS (
        SELECT e.oid FROM pg_extension AS e WHERE e.extname = extension
    ), members AS (
        SELECT d.classid, d.objid FROM pg_depend AS d, ext
        WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
    ), views AS (
        SELECT c.oid FROM pg_class AS c JOIN members AS m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
        WHERE c.relkind = 'v'
    ), view_helpers AS (
        SELECT d.refobjid AS oid FROM pg_depend AS d JOIN pg_rewrite AS r ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
        WHERE d.refclassid = 'pg_proc'::regclass AND r.ev_class IN (SELECT oid FROM views)
    )
    SELECT 'function', p.proname::text, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),
           p.proacl IS NULL OR EXISTS (SELECT FROM aclexplode(p.proacl) AS a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
    FROM pg_proc AS p JOIN members AS m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
    WHERE p.prorettype <> 'trigger'::regtype AND p.oid NOT IN (SELECT oid FROM view_helpers)
    UNION ALL
    SELECT CASE c.relkind WHEN 'v' THEN 'view' ELSE 'type' END, c.relname::text,
           string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum), '',
           EXISTS (SELECT FROM aclexplode(c.relacl) AS x WHERE x.grantee = 0 AND x.privilege_type = 'SELECT')
    FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    -- (From PostgreSQL 17 a table's row type is a member too: only views
    -- and stand-alone composite types.)
    WHERE c.relkind IN ('v', 'c')
      AND (c.oid IN (SELECT oid FROM views)
           OR c.oid IN (SELECT t.typrelid FROM pg_type AS t JOIN members AS m ON m.classid = 'pg_type'::regclass AND m.objid = t.oid
                        WHERE t.typtype = 'c'))
    GROUP BY c.oid, c.relkind, c.relname, c.relacl;
$$;

-- The error a statement raises, with ratelimit.error_format set to
-- error_format for it (NULL: as the session has it): SQLSTATE, message,
-- detail and hint as a client receives them ('' when absent); 'no error'.
CREATE FUNCTION public.error_of(statement text, error_format text DEFAULT NULL,
                                OUT state text, OUT message text, OUT detail text, OUT hint text)
LANGUAGE plpgsql
SET search_path = public, pg_catalog
AS $$
BEGIN
    IF error_format IS NOT NULL THEN
        PERFORM set_config('ratelimit.error_format', error_format, true);
    END IF;
    EXECUTE statement;
    state := 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                            detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
END;
$$;

-- Sets a setting of the current database for new sessions, as ALTER
-- DATABASE ... SET does (value NULL: RESET); answers the database's name.
-- test/regress/router/sql/routed_settings.sql calls it on every partition through
-- PL/Proxy, to give the partitions settings of their own.
CREATE FUNCTION public.set_database_setting(setting text, value text) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
BEGIN
    IF value IS NULL THEN
        EXECUTE format('ALTER DATABASE %I RESET %s', current_database(), quote_ident(lower(setting)));
    ELSE
        EXECUTE format('ALTER DATABASE %I SET %s = %L', current_database(), quote_ident(lower(setting)), value);
    END IF;
    RETURN current_database();
END;
$$;
