// The records pending_grants.cpp keeps for a transaction, as pure data: a
// list of records in the order they were added, one chain per key through
// the subtransaction levels (each record's `below`: the newest record of its
// key when it was added), an open-addressing index by key with tombstones,
// and what a subtransaction's end does to them (a commit moves its records
// into the parent's, merging those of one key; a rollback gives back its
// records, newest first, once). No PostgreSQL header, no allocation, no
// exception: the caller hands over the storage (Adopt), and the unit tests
// (test/unit/grant_records_test.cpp) build it without a server.
//
// Record is trivially copyable, with the fields
//   std::uint32_t hash;   of its key (equal keys hash equal)
//   int below;            set by the caller from NewestOfKey before Add
//   std::uint32_t subid;  the subtransaction it belongs to (0: none)
//   bool keep;            given back only if its own subtransaction rolls back
//   bool active;          granted (an inactive record is dropped at its level's end)
// and Rules has the static functions
//   bool SameKey(const Record&, const Record&)    one row under one limit
//   bool CarriedBy(const Record& a, const Record& b)   b may merge into a
//   void Carry(Record* a, const Record& b)         merges b into a
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace ratelimit_pg {

template <class Record, class Rules>
class GrantRecords {
 public:
  using SubId = decltype(Record::subid);
  static_assert(std::is_trivially_copyable_v<Record>);

  // The ints the storage of `capacity` records needs beside them.
  static constexpr int IntsFor(int capacity) { return 4 * capacity; }
  // The capacity to grow to when Full.
  int Grown() const { return capacity_ == 0 ? 8 : capacity_ * 2; }
  bool Full() const { return count_ == capacity_; }
  int Count() const { return count_; }
  int Capacity() const { return capacity_; }
  int Tombstones() const { return tombstones_; }
  Record& operator[](int i) { return records_[i]; }
  const Record& operator[](int i) const { return records_[i]; }

  // Empty, with no storage (the caller frees it).
  void Reset() { *this = GrantRecords(); }

  // Moves to new storage: `records` for `capacity` records (>= Count()),
  // `ints` IntsFor(capacity) of them. The index is rebuilt at next use.
  void Adopt(Record* records, int* ints, int capacity) {
    if (count_ > 0) std::memcpy(static_cast<void*>(records), records_, sizeof(Record) * count_);
    records_ = records;
    slots_ = ints;
    slot_scratch_ = ints + 2 * capacity;
    carrier_scratch_ = ints + 3 * capacity;
    capacity_ = capacity;
    index_valid_ = false;
  }

  // The newest record of r's key, or -1 (r need not be in the list).
  int NewestOfKey(const Record& r) {
    if (!index_valid_) RebuildIndex();
    return NewestIn(SlotOfKey(r));
  }

  // Appends r (not Full; r.below from NewestOfKey). Not indexed until
  // Remember. Returns its index.
  int Add(const Record& r) {
    records_[count_] = r;
    return count_++;
  }

  // Where the next record goes (not Full), to be built in place and then
  // appended with AddNext (as Add, without the copy). Until then it is not
  // in the list: NewestOfKey may be asked about it.
  Record& Next() { return records_[count_]; }
  int AddNext() { return count_++; }

  // Record i (the newest, just granted and marked active) is indexed as its
  // key's newest, or merged into that one if it carries it (a limit called
  // again in one subtransaction keeps one record). Returns where the
  // grant is now.
  int Remember(int i) {
    const Record& r = records_[i];
    int slot = SlotOfKey(r);
    int known = NewestIn(slot);
    if (i == count_ - 1 && known >= 0 && known != i && Rules::CarriedBy(records_[known], r)) {
      Rules::Carry(&records_[known], r);
      --count_;
      return known;
    }
    SetSlot(slot, i);
    return i;
  }

  // Record i was not granted: dropped if it is the newest, else left
  // inactive (dropped at its level's end).
  void Forget(int i) {
    if (i == count_ - 1) --count_;
  }

  // The records of subtransaction subid are the list's last ones: each was
  // added while it was the innermost, or moved to it when a child it started
  // committed. The index of its first.
  int FirstOf(SubId subid) const {
    int first = count_;
    while (first > 0 && records_[first - 1].subid == subid) --first;
    return first;
  }

  // Drops the records from `first` on, newest first, handing each active
  // one to give(Record&) before it goes (a rollback's refunds: each once).
  template <class GiveFn>
  void RollBack(int first, GiveFn&& give) {
    if (!index_valid_ && count_ > first) RebuildIndex();
    for (int i = count_ - 1; i >= first; --i) {
      Record& r = records_[i];
      if (r.active) give(r);
      r.active = false;
      Unindex(i);
      count_ = i;
    }
    if (tombstones_ > capacity_) RebuildIndex();
  }

  // A committed subtransaction's records become its parent's: each carried
  // by the parent's newest record of its key where it can be (so a call per
  // subtransaction, as a PL/pgSQL exception block makes, still keeps one
  // record per limit), else moved down; the index follows, slot by slot. A
  // record kept only for its subtransaction ("keep"), or never granted, is
  // dropped.
  void MoveToParent(SubId subid, SubId parent) {
    if (!index_valid_ && count_ > 0) RebuildIndex();
    int first = FirstOf(subid);
    int n = count_ - first;
    // Before anything moves: each record's slot, and its key's newest record
    // in the parent (down its chain of earlier records).
    for (int k = 0; k < n; ++k) {
      const Record& r = records_[first + k];
      int slot = SlotOfKey(r);
      slot_scratch_[k] = slots_[slot] == first + k + 1 ? slot : -1;
      int below = r.below;
      while (below >= first) below = records_[below].below;
      carrier_scratch_[k] = below;
    }
    int kept = first;
    for (int k = 0; k < n; ++k) {
      Record r = records_[first + k];
      r.subid = parent;
      int carrier = carrier_scratch_[k];
      int at = -1;  // where the record is now (-1: dropped)
      if (r.active && !r.keep) {
        if (carrier >= 0 && Rules::CarriedBy(records_[carrier], r)) {
          Rules::Carry(&records_[carrier], r);
          at = carrier;
        } else {
          r.below = carrier;
          records_[kept] = r;
          at = kept++;
        }
      }
      if (slot_scratch_[k] >= 0) SetSlot(slot_scratch_[k], at >= 0 ? at : carrier);
    }
    count_ = kept;
  }

 private:
  int SlotMask() const { return 2 * capacity_ - 1; }

  // The slot of r's key: the one holding its newest record, else the first
  // free one on its probe path (a tombstone, or the empty slot ending it).
  int SlotOfKey(const Record& r) const {
    int mask = SlotMask();
    int reuse = -1;
    for (int slot = static_cast<int>(r.hash) & mask;; slot = (slot + 1) & mask) {
      int at = slots_[slot];
      if (at == 0) return reuse >= 0 ? reuse : slot;
      if (at < 0) {
        if (reuse < 0) reuse = slot;
      } else if (Rules::SameKey(records_[at - 1], r)) {
        return slot;
      }
    }
  }

  // The newest record in a slot, or -1.
  int NewestIn(int slot) const { return slots_[slot] > 0 ? slots_[slot] - 1 : -1; }

  // Points a slot at record `at` (-1: leaves a tombstone).
  void SetSlot(int slot, int at) {
    if (slots_[slot] < 0) --tombstones_;
    if (at < 0) ++tombstones_;
    slots_[slot] = at >= 0 ? at + 1 : -1;
  }

  // Makes the index hold the newest record of each key.
  void RebuildIndex() {
    std::memset(slots_, 0, sizeof(int) * 2 * capacity_);
    tombstones_ = 0;
    for (int i = 0; i < count_; ++i) slots_[SlotOfKey(records_[i])] = i + 1;
    index_valid_ = true;
  }

  // Takes record i out of the index (it is being dropped): its key's slot
  // goes back to the record before it, if the slot was its own.
  void Unindex(int i) {
    int slot = SlotOfKey(records_[i]);
    if (slots_[slot] == i + 1) SetSlot(slot, records_[i].below);
  }

  Record* records_ = nullptr;
  int count_ = 0;
  int capacity_ = 0;
  // Open addressing over the records, keyed by Rules::SameKey: slot -> index
  // + 1 of the newest record of the key; 0 empty, -1 a tombstone (a key
  // whose records were all dropped). 2 * capacity slots, kept up to date as
  // records are added, carried, moved and dropped; rebuilt only when the
  // records move to new storage or tombstones pile up.
  int* slots_ = nullptr;
  int tombstones_ = 0;
  bool index_valid_ = false;
  // Scratch for MoveToParent, capacity entries each.
  int* slot_scratch_ = nullptr;
  int* carrier_scratch_ = nullptr;
};

}  // namespace ratelimit_pg
