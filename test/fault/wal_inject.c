/*
 * wal_inject.so: a test-only function for scripts/memory-durability-test.sh
 * that writes an arbitrary WAL record of any resource manager, to show
 * that redo of ratelimit's resource manager skips, with a LOG line, what it
 * cannot apply (a damaged or foreign record) and never stops a start.
 *
 *   CREATE FUNCTION pg_temp.inject_wal(rmid int, info int, data bytea)
 *     RETURNS pg_lsn AS '<dir>/wal_inject.so', 'inject_wal' LANGUAGE C STRICT;
 *
 * It is built by the test with the server's pg_config flags and loaded
 * from the test's own directory; it is never installed.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xloginsert.h"
#include "access/xlogrecord.h"
#include "fmgr.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h" /* the varlena macros left postgres.h in 16 */
#endif
#include "utils/pg_lsn.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(inject_wal);

Datum inject_wal(PG_FUNCTION_ARGS) {
  int32 rmid = PG_GETARG_INT32(0);
  int32 info = PG_GETARG_INT32(1);
  bytea *data = PG_GETARG_BYTEA_PP(2);
  XLogRecPtr end;

  if (rmid < 0 || rmid > 255 || info < 0 || info > 255 || (info & ~XLR_RMGR_INFO_MASK) != 0)
    ereport(ERROR, (errmsg("inject_wal: rmid must be 0-255 and info one of the rmgr bits")));
  XLogBeginInsert();
  XLogRegisterData(VARDATA_ANY(data), VARSIZE_ANY_EXHDR(data));
  end = XLogInsert((RmgrId) rmid, (uint8) info);
  XLogFlush(end);
  PG_RETURN_LSN(end);
}
