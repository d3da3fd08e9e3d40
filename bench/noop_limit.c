/*
 * noop_limit.so: the floor a memory grant is measured against (issue 38).
 * A C function with ratelimit_limit's signature and declaration (name text,
 * key text, config jsonb, count float8, reserve bool, throws bool; LANGUAGE
 * C VOLATILE PARALLEL UNSAFE, SECURITY INVOKER, the same defaults) that
 * decides nothing: it reads its arguments as ratelimit_limit does (the
 * name, key and config detoasted, count and reserve) and returns a formed
 * ratelimit_result row: the row a grant of count tokens from a full bucket
 * of the benchmark's config (a million tokens a second, a million at most)
 * answers, (true, NULL, NULL, 1000000 - count, count / 1000000), so that the
 * client receives the same text, "(t,,,999999,1e-06)", and prints it at the
 * same cost. What PostgreSQL itself charges a call of such a function in its
 * own statement and transaction, so that what a grant costs beyond it is
 * the extension's own work.
 *
 *   CREATE FUNCTION bench_noop_limit(name text, key text DEFAULT NULL,
 *       config jsonb DEFAULT NULL, count double precision DEFAULT 1,
 *       reserve boolean DEFAULT false, throws boolean DEFAULT false)
 *     RETURNS ratelimit_result AS '<dir>/noop_limit.so', 'bench_noop_limit'
 *     LANGUAGE C VOLATILE PARALLEL UNSAFE;
 *
 * bench/lib.sh's create_noop_function builds it with the server's pg_config
 * flags into the benchmark's own cluster directory and creates the function
 * there; it is never installed.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h" /* the varlena macros left postgres.h in 16 */
#endif
#include "utils/jsonb.h"
#include "utils/typcache.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(bench_noop_limit);

/* The row: the declared result type's descriptor from the type cache,
 * pinned while the tuple is formed (lookup_rowtype_tupdesc), as a C
 * function returning a named composite type forms its result. */
Datum bench_noop_limit(PG_FUNCTION_ARGS) {
  Datum values[5];
  bool nulls[5] = {false, true, true, false, false};
  TupleDesc desc;
  HeapTuple tuple;
  double count = PG_ARGISNULL(3) ? 1 : PG_GETARG_FLOAT8(3);

  if (PG_ARGISNULL(0))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("name must not be null")));
  (void)PG_GETARG_TEXT_PP(0);
  if (!PG_ARGISNULL(1)) (void)PG_GETARG_TEXT_PP(1);
  if (!PG_ARGISNULL(2)) (void)PG_GETARG_JSONB_P(2);
  values[0] = BoolGetDatum(true);
  values[1] = values[2] = (Datum)0;
  values[3] = Float8GetDatum(1000000 - count);
  values[4] = Float8GetDatum(count / 1000000);
  desc = lookup_rowtype_tupdesc(get_fn_expr_rettype(fcinfo->flinfo), -1);
  tuple = heap_form_tuple(desc, values, nulls);
  ReleaseTupleDesc(desc);
  PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}
