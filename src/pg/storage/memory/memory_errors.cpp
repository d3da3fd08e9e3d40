// The memory storage's own errors (memory_errors.h).
#include "storage/memory/memory_errors.h"

#include "shmem/stats.h"
#include "storage/memory/memory_names.h"
#include "support/errors.h"

namespace ratelimit_pg {

void RaiseMemoryNoRoom(const LimitCall& call, ModifyResult why) {
  CountNoRoom(call);
  // An inline config's call is refused by the whole bound or by its half.
  const char* share =
      call.owner_config ? "" : ", or every one of the half that limits called with inline configs may take,";
  double name_rows = call.config.options.name_rows;
  if (why == ModifyResult::kNoRoomForName)
    ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY),
                    errmsg("no room for memory rate limit \"%.*s\": its memoryKeys entries (%.0f) are in use",
                           EchoLength(call.id.name, call.id.name_len), call.id.name, name_rows),
                    errdetail("Every entry of the limit holds a key that is not back in its initial state."),
                    errhint("Raise the limit's memoryKeys.")));
  if (why == kNoRoomForNewName)
    ereport(
        ERROR,
        (errcode(ERRCODE_OUT_OF_MEMORY),
         errmsg("no room for memory rate limit \"%.*s\": the names memory limits may have are in use",
                EchoLength(call.id.name, call.id.name_len), call.id.name),
         errdetail("Every name memory limits may have%s has an entry that is not back in its initial state.",
                   share),
         errhint("Raise ratelimit.memory_max_keys (memory limits may have 1%% of it as names, at least "
                 "10000 or all of it), or use fewer names.")));
  if (why == kNoRoomForLongIdentity)
    ereport(ERROR,
            (errcode(ERRCODE_OUT_OF_MEMORY),
             errmsg("no room for memory rate limit \"%.*s\": the entries for a name and key of more than %d "
                    "bytes together are in use",
                    EchoLength(call.id.name, call.id.name_len), call.id.name, kMemoryCompactBytes),
             errdetail("Every such entry%s holds a limit that is not back in its initial state.", share),
             errhint("Raise ratelimit.memory_max_keys (1%% of it, at least 10000 or all of it, may be such "
                     "entries), or pass a shorter key, such as a digest (md5(key)).")));
  ereport(ERROR,
          (errcode(ERRCODE_OUT_OF_MEMORY),
           errmsg("no room for memory rate limit \"%.*s\": ratelimit.memory_max_keys entries are in use",
                  EchoLength(call.id.name, call.id.name_len), call.id.name),
           errdetail(call.owner_config ? "Every entry holds a limit that is not back in its initial state."
                                       : "Every entry, or every entry of the half that limits called with "
                                         "inline configs may take, holds a limit that is not back in its "
                                         "initial state."),
           errhint("Raise ratelimit.memory_max_keys, or define the limit with ratelimit_define().")));
  pg_unreachable();
}

void RaiseMemoryUncommittedConfig(const LimitCall& call) {
  ereport(ERROR,
          (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
           errmsg("memory rate limit \"%.*s\" cannot be called in the transaction that changes its config",
                  EchoLength(call.id.name, call.id.name_len), call.id.name),
           errdetail("A memory limit's entry is not rolled back with the transaction: a decision under a "
                     "config that a rollback could take back would outlive it."),
           errhint("Commit the config change first.")));
  pg_unreachable();
}

void RaiseMemoryPrepareRefused() {
  ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                  errmsg("cannot PREPARE a transaction that holds a grant of a memory rate limit"),
                  errdetail("A memory limit's grant is given back if its transaction rolls back; a prepared "
                            "transaction outlives this session, which would have to give it back."),
                  errhint("Take the grant outside the prepared transaction, or configure the limit with "
                          "\"on_rollback\": \"keep\".")));
  pg_unreachable();
}

void RaiseMemoryNotDurable() {
  ereport(
      ERROR,
      (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE), errmsg("memory rate limits are not durable yet"),
       errdetail("With ratelimit.memory_durability = wal, a memory limit is written only once the "
                 "background worker \"ratelimit memory durability\" has logged every memory limit "
                 "since the server started, and it has not done so within 10 seconds."),
       errhint("See the server log for the worker; it needs a free slot of max_worker_processes. Or set "
               "ratelimit.memory_durability = off.")));
  pg_unreachable();
}

}  // namespace ratelimit_pg
