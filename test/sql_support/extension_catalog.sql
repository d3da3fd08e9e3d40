\set extension_catalog_echo :ECHO
\set ECHO none
-- What an installed extension is, as the catalog says, object by object; and
-- the proof that a fresh install of the default version (its complete script,
-- sql/EXT--VERSION.sql) is the install updated from every release. Read with
-- \i test/sql_support/extension_catalog.sql (a path from the top of the
-- source tree) by sql/upgrade.sql for ratelimit and by
-- scripts/plproxy-test.sh for ratelimit_proxy. Not a test itself; its lines
-- are not echoed. Everything lives in pg_temp, for the session.
--
-- A snapshot is a set of rows (object, property, value): the object as
-- pg_describe_object names it (no OID), the property, its value as text.
-- The objects: the extension's members, what belongs to them without being
-- a member (columns, constraints, indexes, triggers, rules, policies, the
-- sequences of identity and serial columns), the schema the extension is in,
-- the database's default privileges and the extension itself. Members of a
-- kind not listed below (an operator, a cast...) are compared by membership,
-- comment, privileges and dependencies.

CREATE TEMP TABLE catalog_snapshots (snapshot text, object text, property text, value text);
-- The objects of the snapshot being taken (catalog_objects, computed once).
CREATE TEMP TABLE catalog_object_set (classid oid, objid oid, objsubid integer);

-- The objects a snapshot covers, as pg_depend and pg_description address
-- them. extension_catalog saves them in catalog_object_set, which the
-- functions after catalog_members read.
CREATE FUNCTION pg_temp.catalog_objects(extension name)
RETURNS TABLE (classid oid, objid oid, objsubid integer)
LANGUAGE sql STABLE AS $$
WITH ext AS (
    SELECT e.oid, e.extnamespace FROM pg_catalog.pg_extension AS e WHERE e.extname = extension
), members AS (
    SELECT d.classid, d.objid, d.objsubid
    FROM pg_catalog.pg_depend AS d JOIN ext ON d.refobjid = ext.oid
    WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.deptype = 'e'
), member_relations AS (
    -- Member tables, views and sequences, and the relations of member composite types.
    SELECT m.objid AS oid FROM members AS m WHERE m.classid = 'pg_catalog.pg_class'::regclass
    UNION
    SELECT t.typrelid FROM members AS m JOIN pg_catalog.pg_type AS t ON t.oid = m.objid
    WHERE m.classid = 'pg_catalog.pg_type'::regclass AND t.typrelid <> 0
), relations AS (
    -- With the sequences their columns own (identity, serial).
    SELECT oid FROM member_relations
    UNION
    SELECT d.objid FROM pg_catalog.pg_depend AS d JOIN pg_catalog.pg_class AS s ON s.oid = d.objid
    WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.refclassid = 'pg_catalog.pg_class'::regclass
      AND d.refobjid IN (SELECT oid FROM member_relations) AND d.deptype IN ('a', 'i') AND s.relkind = 'S'
)
SELECT m.classid, m.objid, m.objsubid FROM members AS m
UNION
SELECT 'pg_catalog.pg_class'::regclass, r.oid, 0 FROM relations AS r
UNION
SELECT 'pg_catalog.pg_class'::regclass, a.attrelid, a.attnum
FROM pg_catalog.pg_attribute AS a JOIN relations AS r ON r.oid = a.attrelid
WHERE a.attnum > 0 AND NOT a.attisdropped
UNION
SELECT 'pg_catalog.pg_class'::regclass, i.indexrelid, 0 FROM pg_catalog.pg_index AS i JOIN relations AS r ON r.oid = i.indrelid
UNION
SELECT 'pg_catalog.pg_constraint'::regclass, c.oid, 0 FROM pg_catalog.pg_constraint AS c
WHERE c.conrelid IN (SELECT oid FROM relations)
   OR c.contypid IN (SELECT m.objid FROM members AS m WHERE m.classid = 'pg_catalog.pg_type'::regclass)
UNION
SELECT 'pg_catalog.pg_trigger'::regclass, t.oid, 0 FROM pg_catalog.pg_trigger AS t
WHERE t.tgrelid IN (SELECT oid FROM relations) AND NOT t.tgisinternal
UNION
SELECT 'pg_catalog.pg_rewrite'::regclass, w.oid, 0 FROM pg_catalog.pg_rewrite AS w WHERE w.ev_class IN (SELECT oid FROM relations)
UNION
SELECT 'pg_catalog.pg_policy'::regclass, p.oid, 0 FROM pg_catalog.pg_policy AS p WHERE p.polrelid IN (SELECT oid FROM relations)
UNION
SELECT 'pg_catalog.pg_namespace'::regclass, ext.extnamespace, 0 FROM ext
$$;

-- Which objects are the extension's members (pg_depend deptype 'e').
CREATE FUNCTION pg_temp.catalog_members(extension name)
RETURNS TABLE (object text, property text, value text)
LANGUAGE sql STABLE AS $$
SELECT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid), 'member of the extension',
       (pg_catalog.pg_identify_object(d.classid, d.objid, d.objsubid)).type
FROM pg_catalog.pg_depend AS d JOIN pg_catalog.pg_extension AS e ON e.oid = d.refobjid
WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.deptype = 'e' AND e.extname = extension
$$;

-- Functions and procedures: the whole definition, and each attribute on its own line.
CREATE FUNCTION pg_temp.catalog_functions()
RETURNS TABLE (object text, property text, value text)
LANGUAGE sql STABLE AS $$
SELECT pg_catalog.pg_describe_object(o.classid, o.objid, 0), v.property, v.value
FROM pg_temp.catalog_object_set AS o
JOIN pg_catalog.pg_proc AS p ON o.classid = 'pg_catalog.pg_proc'::regclass AND p.oid = o.objid
JOIN pg_catalog.pg_language AS l ON l.oid = p.prolang
CROSS JOIN LATERAL (VALUES
    ('definition', CASE WHEN p.prokind <> 'a' THEN pg_catalog.pg_get_functiondef(p.oid) END),
    ('kind', p.prokind::text),
    ('language', l.lanname::text),
    ('owner', pg_catalog.pg_get_userbyid(p.proowner)::text),
    ('security definer', p.prosecdef::text),
    ('volatility', p.provolatile::text),
    ('parallel', p.proparallel::text),
    ('strict', p.proisstrict::text),
    ('leakproof', p.proleakproof::text),
    ('cost', p.procost::text),
    ('rows', p.prorows::text),
    ('returns a set', p.proretset::text),
    ('result', pg_catalog.pg_get_function_result(p.oid)),
    ('arguments', pg_catalog.pg_get_function_arguments(p.oid)),
    ('argument names', p.proargnames::text),
    ('argument modes', p.proargmodes::text),
    ('argument defaults', pg_catalog.pg_get_expr(p.proargdefaults, 0)),
    ('variadic', p.provariadic::regtype::text),
    ('support', p.prosupport::text),
    ('settings', p.proconfig::text),
    ('source', p.prosrc),
    ('library', p.probin),
    ('sql body', pg_catalog.pg_get_function_sqlbody(p.oid)),
    ('privileges', p.proacl::text)) AS v (property, value)
$$;

-- Relations (tables, views, composite types' relations, indexes, sequences).
CREATE FUNCTION pg_temp.catalog_relations()
RETURNS TABLE (object text, property text, value text)
LANGUAGE sql STABLE AS $$
SELECT pg_catalog.pg_describe_object(o.classid, o.objid, 0), v.property, v.value
FROM pg_temp.catalog_object_set AS o
JOIN pg_catalog.pg_class AS c ON o.classid = 'pg_catalog.pg_class'::regclass AND o.objsubid = 0 AND c.oid = o.objid
LEFT JOIN pg_catalog.pg_am AS am ON am.oid = c.relam
LEFT JOIN pg_catalog.pg_tablespace AS ts ON ts.oid = c.reltablespace
LEFT JOIN pg_catalog.pg_index AS i ON i.indexrelid = c.oid
LEFT JOIN pg_catalog.pg_sequence AS s ON s.seqrelid = c.oid
CROSS JOIN LATERAL (VALUES
    ('kind', c.relkind::text),
    ('owner', pg_catalog.pg_get_userbyid(c.relowner)::text),
    ('privileges', c.relacl::text),
    ('options', c.reloptions::text),
    ('replica identity', c.relreplident::text),
    ('persistence', c.relpersistence::text),
    ('row security', c.relrowsecurity::text),
    ('forced row security', c.relforcerowsecurity::text),
    ('access method', am.amname::text),
    ('tablespace', ts.spcname::text),
    ('partition key', CASE WHEN c.relkind = 'p' THEN pg_catalog.pg_get_partkeydef(c.oid) END),
    ('inherits', (SELECT string_agg(h.inhparent::regclass::text, ', ' ORDER BY h.inhseqno)
                  FROM pg_catalog.pg_inherits AS h WHERE h.inhrelid = c.oid)),
    ('view definition', CASE WHEN c.relkind IN ('v', 'm') THEN pg_catalog.pg_get_viewdef(c.oid) END),
    ('index definition', CASE WHEN i.indexrelid IS NOT NULL THEN pg_catalog.pg_get_indexdef(c.oid) END),
    ('clustered on', i.indisclustered::text),
    ('replica identity index', i.indisreplident::text),
    ('sequence', CASE WHEN s.seqrelid IS NOT NULL THEN
        format('%s start %s increment %s minimum %s maximum %s cache %s cycle %s', s.seqtypid::regtype,
               s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle) END)) AS v (property, value)
$$;

-- Columns of tables, views and composite types, by their order among the live ones.
CREATE FUNCTION pg_temp.catalog_columns()
RETURNS TABLE (object text, property text, value text)
LANGUAGE sql STABLE AS $$
SELECT pg_catalog.pg_describe_object('pg_catalog.pg_class'::regclass, a.attrelid, a.attnum), v.property, v.value
FROM (SELECT a.*, row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS position
      FROM pg_catalog.pg_attribute AS a JOIN pg_catalog.pg_class AS c ON c.oid = a.attrelid
      WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind NOT IN ('i', 'I')
        AND a.attrelid IN (SELECT o.objid FROM pg_temp.catalog_object_set AS o
                           WHERE o.classid = 'pg_catalog.pg_class'::regclass AND o.objsubid = 0)) AS a
LEFT JOIN pg_catalog.pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
LEFT JOIN pg_catalog.pg_collation AS co ON co.oid = a.attcollation
CROSS JOIN LATERAL (VALUES
    ('position', a.position::text),
    ('type', pg_catalog.format_type(a.atttypid, a.atttypmod)),
    ('not null', a.attnotnull::text),
    ('default', pg_catalog.pg_get_expr(d.adbin, d.adrelid)),
    ('identity', a.attidentity::text),
    ('generated', a.attgenerated::text),
    ('collation', co.collname::text),
    ('privileges', a.attacl::text),
    -- (PostgreSQL's reserved pg_attver option, present in some back
    -- branches, is a per-install counter, not part of the schema.)
    ('options', (SELECT string_agg(o, ', ' ORDER BY n) FROM unnest(a.attoptions) WITH ORDINALITY AS u (o, n)
                 WHERE o NOT LIKE 'pg\_attver=%')),
    ('storage', a.attstorage::text),
    ('compression', a.attcompression::text),
    ('statistics target', a.attstattarget::text)) AS v (property, value)
$$;

-- Constraints, triggers, rules and policies, each by its definition.
CREATE FUNCTION pg_temp.catalog_rules()
RETURNS TABLE (object text, property text, value text)
LANGUAGE sql STABLE AS $$
SELECT pg_catalog.pg_describe_object(o.classid, o.objid, 0), v.property, v.value
FROM pg_temp.catalog_object_set AS o
LEFT JOIN pg_catalog.pg_constraint AS c ON o.classid = 'pg_catalog.pg_constraint'::regclass AND c.oid = o.objid
LEFT JOIN pg_catalog.pg_trigger AS t ON o.classid = 'pg_catalog.pg_trigger'::regclass AND t.oid = o.objid
LEFT JOIN pg_catalog.pg_rewrite AS w ON o.classid = 'pg_catalog.pg_rewrite'::regclass AND w.oid = o.objid
LEFT JOIN pg_catalog.pg_policy AS p ON o.classid = 'pg_catalog.pg_policy'::regclass AND p.oid = o.objid
CROSS JOIN LATERAL (VALUES
    ('definition', CASE WHEN c.oid IS NOT NULL THEN pg_catalog.pg_get_constraintdef(c.oid)
                        WHEN t.oid IS NOT NULL THEN pg_catalog.pg_get_triggerdef(t.oid)
                        WHEN w.oid IS NOT NULL AND w.rulename <> '_RETURN' THEN pg_catalog.pg_get_ruledef(w.oid)
                        WHEN p.oid IS NOT NULL THEN
                            format('%s %s to %s using (%s) with check (%s)', p.polcmd,
                                   CASE WHEN p.polpermissive THEN 'permissive' ELSE 'restrictive' END,
                                   (SELECT string_agg(CASE WHEN r = 0 THEN 'public' ELSE pg_catalog.pg_get_userbyid(r)::text END,
                                                      ', ' ORDER BY 1) FROM unnest(p.polroles) AS r),
                                   pg_catalog.pg_get_expr(p.polqual, p.polrelid),
                                   pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid)) END),
    ('validated', c.convalidated::text),
    ('enabled', coalesce(t.tgenabled, w.ev_enabled)::text)) AS v (property, value)
WHERE o.classid IN ('pg_catalog.pg_constraint'::regclass, 'pg_catalog.pg_trigger'::regclass,
                    'pg_catalog.pg_rewrite'::regclass, 'pg_catalog.pg_policy'::regclass)
$$;

-- Types (composite types' attributes are their relation's columns) and the schema.
CREATE FUNCTION pg_temp.catalog_types_and_schema()
RETURNS TABLE (object text, property text, value text)
LANGUAGE sql STABLE AS $$
SELECT pg_catalog.pg_describe_object(o.classid, o.objid, 0), v.property, v.value
FROM pg_temp.catalog_object_set AS o
JOIN pg_catalog.pg_type AS t ON o.classid = 'pg_catalog.pg_type'::regclass AND t.oid = o.objid
CROSS JOIN LATERAL (VALUES
    ('type kind', t.typtype::text),
    ('owner', pg_catalog.pg_get_userbyid(t.typowner)::text),
    ('privileges', t.typacl::text),
    ('base type', CASE WHEN t.typbasetype <> 0 THEN pg_catalog.format_type(t.typbasetype, t.typtypmod) END),
    ('not null', t.typnotnull::text),
    ('default', t.typdefault),
    ('labels', (SELECT string_agg(e.enumlabel::text, ', ' ORDER BY e.enumsortorder)
                FROM pg_catalog.pg_enum AS e WHERE e.enumtypid = t.oid)),
    ('range of', (SELECT r.rngsubtype::regtype::text FROM pg_catalog.pg_range AS r WHERE r.rngtypid = t.oid))
    ) AS v (property, value)
UNION ALL
SELECT pg_catalog.pg_describe_object(o.classid, o.objid, 0), v.property, v.value
FROM pg_temp.catalog_object_set AS o
JOIN pg_catalog.pg_namespace AS n ON o.classid = 'pg_catalog.pg_namespace'::regclass AND n.oid = o.objid
CROSS JOIN LATERAL (VALUES
    ('owner', pg_catalog.pg_get_userbyid(n.nspowner)::text),
    ('privileges', n.nspacl::text)) AS v (property, value)
$$;

-- Comments of every object (columns' included) and the initial privileges
-- that pg_dump compares an object's privileges with (pg_init_privs).
CREATE FUNCTION pg_temp.catalog_comments_and_initial_privileges()
RETURNS TABLE (object text, property text, value text)
LANGUAGE sql STABLE AS $$
SELECT pg_catalog.pg_describe_object(o.classid, o.objid, o.objsubid), 'comment', d.description
FROM pg_temp.catalog_object_set AS o
JOIN pg_catalog.pg_description AS d ON d.classoid = o.classid AND d.objoid = o.objid AND d.objsubid = o.objsubid
UNION ALL
SELECT pg_catalog.pg_describe_object(o.classid, o.objid, o.objsubid), 'initial privileges',
       i.privtype::text || ' ' || i.initprivs::text
FROM pg_temp.catalog_object_set AS o
JOIN pg_catalog.pg_init_privs AS i ON i.classoid = o.classid AND i.objoid = o.objid AND i.objsubid = o.objsubid
$$;

-- The extension's own row, and the database's default privileges (which a
-- script could change with ALTER DEFAULT PRIVILEGES).
CREATE FUNCTION pg_temp.catalog_extension(extension name)
RETURNS TABLE (object text, property text, value text)
LANGUAGE sql STABLE AS $$
SELECT 'extension ' || e.extname, v.property, v.value
FROM pg_catalog.pg_extension AS e
CROSS JOIN LATERAL (VALUES
    ('version', e.extversion),
    ('schema', e.extnamespace::regnamespace::text),
    ('owner', pg_catalog.pg_get_userbyid(e.extowner)::text),
    ('relocatable', e.extrelocatable::text),
    ('configuration tables', e.extconfig::regclass[]::text),
    ('configuration conditions', e.extcondition::text),
    ('requires', (SELECT string_agg(r.extname::text, ', ' ORDER BY r.extname)
                  FROM pg_catalog.pg_depend AS d JOIN pg_catalog.pg_extension AS r ON r.oid = d.refobjid
                  WHERE d.classid = 'pg_catalog.pg_extension'::regclass AND d.objid = e.oid
                    AND d.refclassid = 'pg_catalog.pg_extension'::regclass))) AS v (property, value)
WHERE e.extname = extension
UNION ALL
SELECT format('default privileges on %s of role %s in %s', a.defaclobjtype, pg_catalog.pg_get_userbyid(a.defaclrole),
              CASE WHEN a.defaclnamespace = 0 THEN 'every schema' ELSE 'schema ' || a.defaclnamespace::regnamespace::text END),
       'privileges', a.defaclacl::text
FROM pg_catalog.pg_default_acl AS a
$$;

-- What each object depends on, but for its membership (catalog_members).
CREATE FUNCTION pg_temp.catalog_dependencies()
RETURNS TABLE (object text, property text, value text)
LANGUAGE sql STABLE AS $$
SELECT pg_catalog.pg_describe_object(o.classid, o.objid, o.objsubid), 'depends on',
       d.deptype::text || ' ' || pg_catalog.pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid)
FROM pg_temp.catalog_object_set AS o
JOIN pg_catalog.pg_depend AS d ON d.classid = o.classid AND d.objid = o.objid AND d.objsubid = o.objsubid
WHERE NOT (d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.deptype = 'e')
$$;

-- The whole snapshot of an installed extension (a NULL value is no row).
CREATE FUNCTION pg_temp.extension_catalog(extension name)
RETURNS TABLE (object text, property text, value text)
LANGUAGE sql AS $$
DELETE FROM pg_temp.catalog_object_set;
INSERT INTO pg_temp.catalog_object_set SELECT * FROM pg_temp.catalog_objects(extension);
SELECT * FROM (
SELECT * FROM pg_temp.catalog_members(extension)
UNION ALL SELECT * FROM pg_temp.catalog_functions()
UNION ALL SELECT * FROM pg_temp.catalog_relations()
UNION ALL SELECT * FROM pg_temp.catalog_columns()
UNION ALL SELECT * FROM pg_temp.catalog_rules()
UNION ALL SELECT * FROM pg_temp.catalog_types_and_schema()
UNION ALL SELECT * FROM pg_temp.catalog_comments_and_initial_privileges()
UNION ALL SELECT * FROM pg_temp.catalog_extension(extension)
UNION ALL SELECT * FROM pg_temp.catalog_dependencies()
) AS c
WHERE c.value IS NOT NULL
$$;

-- Saves the snapshot of the installed extension under a name (replacing one of that name).
CREATE FUNCTION pg_temp.take_snapshot(extension name, snapshot text)
RETURNS void
LANGUAGE sql AS $$
DELETE FROM pg_temp.catalog_snapshots AS s WHERE s.snapshot = take_snapshot.snapshot;
INSERT INTO pg_temp.catalog_snapshots SELECT take_snapshot.snapshot, c.* FROM pg_temp.extension_catalog(extension) AS c;
$$;

-- The rows of one snapshot that the other lacks, both ways; "only_in" names the snapshot that has the row.
CREATE FUNCTION pg_temp.snapshot_differences(snapshot text, reference text)
RETURNS TABLE (only_in text, object text, property text, value text)
LANGUAGE sql STABLE AS $$
SELECT * FROM (
    (SELECT snapshot_differences.snapshot, s.object, s.property, s.value FROM pg_temp.catalog_snapshots AS s
     WHERE s.snapshot = snapshot_differences.snapshot
     EXCEPT ALL
     SELECT snapshot_differences.snapshot, s.object, s.property, s.value FROM pg_temp.catalog_snapshots AS s WHERE s.snapshot = reference)
    UNION ALL
    (SELECT reference, s.object, s.property, s.value FROM pg_temp.catalog_snapshots AS s WHERE s.snapshot = reference
     EXCEPT ALL
     SELECT reference, s.object, s.property, s.value FROM pg_temp.catalog_snapshots AS s WHERE s.snapshot = snapshot_differences.snapshot)
) AS d (only_in, object, property, value)
ORDER BY d.object, d.property, d.only_in, d.value
$$;

-- The members of the installed extension with no comment (COMMENT ON is
-- every object's documentation): none. Types PostgreSQL makes for another
-- object (a table's or view's row type, an array type), which PostgreSQL 17
-- lists as members too, are documented by that object.
CREATE FUNCTION pg_temp.members_without_comment(extension name)
RETURNS SETOF text
LANGUAGE sql STABLE AS $$
SELECT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)
FROM pg_catalog.pg_depend AS d
JOIN pg_catalog.pg_extension AS e ON e.oid = d.refobjid AND e.extname = extension
LEFT JOIN pg_catalog.pg_type AS t ON d.classid = 'pg_catalog.pg_type'::regclass AND t.oid = d.objid
LEFT JOIN pg_catalog.pg_class AS r ON r.oid = t.typrelid
WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.deptype = 'e'
  AND NOT (t.oid IS NOT NULL AND (coalesce(r.relkind <> 'c', false)
           OR EXISTS (SELECT FROM pg_catalog.pg_type AS elem WHERE elem.typarray = t.oid)
           OR EXISTS (SELECT FROM pg_catalog.pg_range AS range WHERE range.rngmultitypid = t.oid)))
  AND pg_catalog.obj_description(d.objid, d.classid::regclass::text::name) IS NULL
ORDER BY 1
$$;

-- Every release an install can start from: each version PostgreSQL offers but
-- the default one (CREATE EXTENSION ... VERSION installs it from its own
-- script, or from an installable version through update scripts), and each
-- update script that the update path from its first version to the default
-- one does not take (installed at its first version and updated along it).
-- All of it is read from the installed sql/ scripts and control file, so a
-- new release needs no change here.
CREATE FUNCTION pg_temp.starting_points(extension name)
RETURNS TABLE (version text, through text)
LANGUAGE sql STABLE AS $$
WITH target AS (
    SELECT a.default_version FROM pg_catalog.pg_available_extensions AS a WHERE a.name = extension
), paths AS (
    SELECT p.source, p.target, p.path FROM pg_catalog.pg_extension_update_paths(extension) AS p WHERE p.path IS NOT NULL
), scripts AS (
    SELECT p.source, p.target FROM paths AS p WHERE p.path = p.source || '--' || p.target
)
SELECT v.version, NULL FROM pg_catalog.pg_available_extension_versions AS v, target
WHERE v.name = extension AND v.version <> target.default_version
UNION ALL
SELECT s.source, s.target FROM scripts AS s
WHERE NOT EXISTS (SELECT FROM paths AS p, target
                  WHERE p.source = s.source AND p.target = target.default_version
                    AND (p.path = s.source || '--' || s.target OR starts_with(p.path, s.source || '--' || s.target || '--')))
ORDER BY 1, 2
$$;

-- Installs the extension afresh: at the default version (version NULL), or at
-- version, updated to through (unless NULL), then to the default version.
CREATE FUNCTION pg_temp.install_extension(extension name, version text, through text)
RETURNS void
LANGUAGE plpgsql
SET client_min_messages = warning AS $$
BEGIN
    EXECUTE format('DROP EXTENSION IF EXISTS %I', extension);
    IF version IS NULL THEN
        EXECUTE format('CREATE EXTENSION %I', extension);
        RETURN;
    END IF;
    EXECUTE format('CREATE EXTENSION %I VERSION %L', extension, version);
    IF through IS NOT NULL THEN
        EXECUTE format('ALTER EXTENSION %I UPDATE TO %L', extension, through);
    END IF;
    IF (SELECT e.extversion FROM pg_catalog.pg_extension AS e WHERE e.extname = extension)
       IS DISTINCT FROM (SELECT a.default_version FROM pg_catalog.pg_available_extensions AS a WHERE a.name = extension) THEN
        EXECUTE format('ALTER EXTENSION %I UPDATE', extension);
    END IF;
END
$$;

-- Installs the extension fresh (snapshot "fresh"), then from every starting
-- point updated to the default version (snapshot "from V [through W]"), and
-- returns every difference from the fresh one: none when the complete
-- script is what the releases add up to. Leaves a fresh install.
CREATE FUNCTION pg_temp.fresh_vs_upgraded(extension name)
RETURNS TABLE (upgraded text, only_in text, object text, property text, value text)
LANGUAGE plpgsql AS $$
DECLARE
    point record;
    label text;
BEGIN
    PERFORM pg_temp.install_extension(extension, NULL, NULL);
    PERFORM pg_temp.take_snapshot(extension, 'fresh');
    FOR point IN SELECT * FROM pg_temp.starting_points(extension) LOOP
        label := 'from ' || point.version || coalesce(' through ' || point.through, '');
        PERFORM pg_temp.install_extension(extension, point.version, point.through);
        PERFORM pg_temp.take_snapshot(extension, label);
        RETURN QUERY SELECT label, d.* FROM pg_temp.snapshot_differences(label, 'fresh') AS d;
    END LOOP;
    PERFORM pg_temp.install_extension(extension, NULL, NULL);
END
$$;

-- Whether planting a change (statements, run in a subtransaction that is
-- rolled back) in the installed extension makes its snapshot differ from
-- snapshot "fresh" in the property of the object named: how the test shows
-- that the comparison sees what it claims to compare.
CREATE FUNCTION pg_temp.planted_difference_found(extension name, plant text, object text, property text)
RETURNS boolean
LANGUAGE plpgsql
SET client_min_messages = warning AS $$
DECLARE
    seen boolean;
BEGIN
    BEGIN
        EXECUTE plant;
        PERFORM pg_temp.take_snapshot(extension, 'planted');
        SELECT count(*) > 0 INTO seen FROM pg_temp.snapshot_differences('planted', 'fresh') AS d
        WHERE d.object = planted_difference_found.object AND d.property = planted_difference_found.property;
        RAISE EXCEPTION USING ERRCODE = 'RLPLT', MESSAGE = 'planted change undone';
    EXCEPTION WHEN SQLSTATE 'RLPLT' THEN
        NULL;
    END;
    RETURN seen;
END
$$;

-- The tree's scripts (files: `md5sum EXT--*.sql` run in sql/, a checksum and
-- a name a line) and control file (control: its text) against what the
-- server has installed and offers. The installed EXT--*.sql files are the
-- tree's, byte for byte (so the comparison tests this tree's scripts, not
-- another build's); the versions and update scripts PostgreSQL offers are
-- the ones the files name; the default versions agree; and the default
-- version has a complete script of its own (else CREATE EXTENSION would run
-- the update path, and the comparison would prove nothing). Returns the
-- disagreements: none. Reads the server's extension directory: superuser.
CREATE FUNCTION pg_temp.release_files_problems(extension name, files text, control text)
RETURNS SETOF text
LANGUAGE sql AS $$
WITH tree AS (
    SELECT l[1] AS checksum, l[2] AS script, regexp_match(l[2], '^' || extension || '--(.+?)(?:--(.+))?\.sql$') AS m
    FROM regexp_split_to_table(trim(files), '\n') AS line, regexp_match(trim(line), '^([0-9a-f]{32})\s+\*?(\S+)$') AS l
), directory AS (
    SELECT setting || '/extension' AS path FROM pg_catalog.pg_config WHERE name = 'SHAREDIR'
), installed AS (
    SELECT f AS script, md5(pg_catalog.pg_read_binary_file(directory.path || '/' || f)) AS checksum
    FROM directory, pg_catalog.pg_ls_dir(directory.path) AS f
    WHERE f ~ ('^' || extension || '--.+\.sql$')
), tree_default AS (
    SELECT (regexp_match(control, $r$default_version\s*=\s*'([^']*)'$r$))[1] AS version
), tree_versions AS (
    SELECT m[1] AS version FROM tree UNION SELECT m[2] FROM tree WHERE m[2] IS NOT NULL
), tree_updates AS (
    SELECT m[1] || '--' || m[2] AS path FROM tree WHERE m[2] IS NOT NULL
), offered_versions AS (
    SELECT v.version FROM pg_catalog.pg_available_extension_versions AS v WHERE v.name = extension
), offered_updates AS (
    SELECT p.path FROM pg_catalog.pg_extension_update_paths(extension) AS p WHERE p.path = p.source || '--' || p.target
)
SELECT format('%s: installed, not in the tree', i.script)
FROM installed AS i WHERE NOT EXISTS (SELECT FROM tree AS t WHERE t.script = i.script)
UNION ALL
SELECT format('%s: in the tree, %s', t.script, CASE WHEN i.script IS NULL THEN 'not installed' ELSE 'installed with other contents' END)
FROM tree AS t LEFT JOIN installed AS i ON i.script = t.script WHERE i.checksum IS DISTINCT FROM t.checksum
UNION ALL
SELECT format('version %s: named by the tree''s scripts, not offered by PostgreSQL', version)
FROM (SELECT version FROM tree_versions EXCEPT SELECT version FROM offered_versions) AS missing
UNION ALL
SELECT format('version %s: offered by PostgreSQL, not named by the tree''s scripts', version)
FROM (SELECT version FROM offered_versions EXCEPT SELECT version FROM tree_versions) AS extra
UNION ALL
SELECT format('update %s: a script in the tree, not offered by PostgreSQL', path)
FROM (SELECT path FROM tree_updates EXCEPT SELECT path FROM offered_updates) AS missing
UNION ALL
SELECT format('update %s: offered by PostgreSQL, no script in the tree', path)
FROM (SELECT path FROM offered_updates EXCEPT SELECT path FROM tree_updates) AS extra
UNION ALL
SELECT format('the control file''s default version %s is not PostgreSQL''s %s', d.version, a.default_version)
FROM tree_default AS d, pg_catalog.pg_available_extensions AS a
WHERE a.name = extension AND d.version IS DISTINCT FROM a.default_version
UNION ALL
SELECT format('the default version %s has no complete script %s--%s.sql', d.version, extension, d.version)
FROM tree_default AS d
WHERE NOT EXISTS (SELECT FROM tree WHERE m[1] = d.version AND m[2] IS NULL)
$$;
\set ECHO :extension_catalog_echo
