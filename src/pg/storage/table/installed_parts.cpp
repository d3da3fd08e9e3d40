// The installed parts of the state table, recognised by their shape, not
// their names alone (installed_parts.h): an owner may replace a CHECK
// under the installed name.
#include <cstring>

#include "storage/table/installed_parts.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "nodes/primnodes.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"
}

namespace ratelimit_pg {
namespace {

// The CHECK constraint the extension installs (shard >= 0): no owner code.
constexpr const char* kInstalledShardCheck = "ratelimit_state_shard_check";

// Whether a node is the integer constant 0 (of type int2, int4 or int8).
bool IsZero(const Node* node) {
  if (node == nullptr || !IsA(node, Const)) return false;
  const auto* c = reinterpret_cast<const Const*>(node);
  if (c->constisnull) return false;
  switch (c->consttype) {
    case INT2OID:
      return DatumGetInt16(c->constvalue) == 0;
    case INT4OID:
      return DatumGetInt32(c->constvalue) == 0;
    case INT8OID:
      return DatumGetInt64(c->constvalue) == 0;
    default:
      return false;
  }
}

// Whether an expression is exactly "shard >= 0", as the extension installs
// it: a built-in integer comparison of the shard column with the constant 0.
// Judged by its shape, not by which functions it calls: a built-in such as
// query_to_xml runs any SQL.
bool IsShardAtLeastZero(const Node* node, AttrNumber shard) {
  if (node == nullptr || !IsA(node, OpExpr)) return false;
  const auto* op = reinterpret_cast<const OpExpr*>(node);
  if ((op->opfuncid != F_INT24GE && op->opfuncid != F_INT2GE && op->opfuncid != F_INT28GE) ||
      list_length(op->args) != 2)
    return false;
  const Node* left = static_cast<const Node*>(linitial(op->args));
  return IsA(left, Var) && reinterpret_cast<const Var*>(left)->varattno == shard &&
         IsZero(static_cast<const Node*>(lsecond(op->args)));
}

}  // namespace

StateColumns FindColumns(Relation rel) {
  StateColumns c{};
  struct {
    const char* name;
    AttrNumber* attnum;
  } wanted[] = {{"name", &c.name}, {"key", &c.key},   {"shard", &c.shard},    {"value", &c.value},
                {"ts", &c.ts},     {"prev", &c.prev}, {"idle_at", &c.idle_at}};
  TupleDesc desc = RelationGetDescr(rel);
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute att = TupleDescAttr(desc, i);
    if (att->attisdropped) continue;
    for (auto& column : wanted)
      if (std::strcmp(NameStr(att->attname), column.name) == 0) *column.attnum = att->attnum;
  }
  return c;
}

bool IsInstalledShardCheck(const ConstrCheck& check, AttrNumber shard) {
  static char* seen = nullptr;
  static AttrNumber seen_shard = InvalidAttrNumber;
  static bool seen_answer = false;
  if (std::strcmp(check.ccname, kInstalledShardCheck) != 0) return false;
  if (seen != nullptr && seen_shard == shard && std::strcmp(seen, check.ccbin) == 0) return seen_answer;
  bool answer = IsShardAtLeastZero(static_cast<Node*>(stringToNode(check.ccbin)), shard);
  char* copy = MemoryContextStrdup(TopMemoryContext, check.ccbin);
  if (seen != nullptr) pfree(seen);
  seen = copy;
  seen_shard = shard;
  seen_answer = answer;
  return answer;
}

bool IsZeroDefault(const Node* node) {
  if (node != nullptr && IsA(node, FuncExpr)) {
    const auto* cast = reinterpret_cast<const FuncExpr*>(node);
    return cast->funcid == F_INT2_INT4 && list_length(cast->args) == 1 &&
           IsZero(static_cast<const Node*>(linitial(cast->args)));
  }
  return IsZero(node);
}

}  // namespace ratelimit_pg
