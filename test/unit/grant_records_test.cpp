// The records of a transaction's pending grants (src/pg/decide/grant_records.h),
// without a server: one key's grants in one subtransaction merge; a
// committed subtransaction's records move into the parent's and merge there;
// a rolled-back one gives back exactly its records (and those its committed
// children moved into it), once; deep nesting; the index's tombstones and
// growth. A model of sums per key and level checks random histories.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "decide/grant_records.h"

namespace {

// A record as the adapter's: the list's fields, and a key, a limit and an
// amount. Its window, as a window kind's: a later one replaces the amount.
struct TestRecord {
  std::uint32_t hash;
  int below;
  std::uint32_t subid;
  bool keep;
  bool active;
  int key;
  int limit;
  double amount;
  int window;
};

struct TestRules {
  static bool SameKey(const TestRecord& a, const TestRecord& b) {
    return a.key == b.key && a.limit == b.limit;
  }
  static bool CarriedBy(const TestRecord& a, const TestRecord& b) {
    return a.active && b.active && a.subid == b.subid && a.keep == b.keep && SameKey(a, b);
  }
  static void Carry(TestRecord* a, const TestRecord& b) {
    if (a->window == b.window) {
      a->amount += b.amount;
    } else {
      a->amount = b.amount;
      a->window = b.window;
    }
  }
};

using Records = ratelimit_pg::GrantRecords<TestRecord, TestRules>;
using Refunds = std::map<int, double>;  // key -> amount given back

// The adapter's side, with std::vector for its memory context: grows the
// storage when full, adds and remembers grants, ends subtransactions.
class Transaction {
 public:
  // hash_mod > 0: keys hash to key % hash_mod, so that many keys share a
  // probe path (collisions, tombstones in the way).
  explicit Transaction(std::uint32_t hash_mod = 0) : hash_mod_(hash_mod) {}

  // A grant of `amount` on `key` in subtransaction `sub`. Returns the
  // record it is in.
  // The record is built in place (Next, AddNext), as the adapter builds it.
  int Grant(std::uint32_t sub, int key, double amount, bool keep = false, int window = 0, int limit = 0) {
    if (list.Full()) Grow();
    TestRecord& r = list.Next();
    r = TestRecord{};
    r.key = key;
    r.limit = limit;
    r.hash = hash_mod_ > 0
                 ? static_cast<std::uint32_t>(key) % hash_mod_
                 : static_cast<std::uint32_t>(key) * 2654435761u + static_cast<std::uint32_t>(limit);
    r.subid = sub;
    r.below = list.NewestOfKey(r);
    int i = list.AddNext();
    TestRecord& added = list[i];
    added.amount = amount;
    added.window = window;
    added.keep = keep;
    added.active = true;
    return list.Remember(i);
  }

  // A reservation (ratelimit_limit_all reserves each limit's record, then
  // grants); Granted or NotGrantedAt follows.
  int Reserve(std::uint32_t sub, int key) {
    if (list.Full()) Grow();
    TestRecord r{};
    r.key = key;
    r.hash = hash_mod_ > 0 ? static_cast<std::uint32_t>(key) % hash_mod_
                           : static_cast<std::uint32_t>(key) * 2654435761u;
    r.subid = sub;
    r.below = list.NewestOfKey(r);
    return list.Add(r);
  }
  int Granted(int i, double amount) {
    list[i].amount = amount;
    list[i].active = true;
    return list.Remember(i);
  }
  void NotGrantedAt(int i) { list.Forget(i); }

  // A call that was reserved but not granted.
  void NotGranted(std::uint32_t sub, int key) {
    if (list.Full()) Grow();
    TestRecord r{};
    r.key = key;
    r.hash = hash_mod_ > 0 ? static_cast<std::uint32_t>(key) % hash_mod_
                           : static_cast<std::uint32_t>(key) * 2654435761u;
    r.subid = sub;
    r.below = list.NewestOfKey(r);
    list.Forget(list.Add(r));
  }

  Refunds RollBack(std::uint32_t sub) { return RollBackFrom(list.FirstOf(sub)); }
  Refunds Abort() { return RollBackFrom(0); }
  void Commit(std::uint32_t sub, std::uint32_t parent) { list.MoveToParent(sub, parent); }

  // The active records' amounts by key, and how many records hold them.
  Refunds Held(std::uint32_t sub) const {
    Refunds held;
    for (int i = 0; i < list.Count(); ++i)
      if (list[i].active && list[i].subid == sub) held[list[i].key] += list[i].amount;
    return held;
  }
  int RecordsOf(std::uint32_t sub) const {
    int n = 0;
    for (int i = 0; i < list.Count(); ++i) n += list[i].subid == sub;
    return n;
  }

  Records list;
  int refunds_given = 0;

 private:
  Refunds RollBackFrom(int first) {
    Refunds given;
    list.RollBack(first, [&](TestRecord& r) {
      given[r.key] += r.amount;
      ++refunds_given;
    });
    return given;
  }

  void Grow() {
    int grown = list.Grown();
    auto records = std::make_unique<TestRecord[]>(grown);
    auto ints = std::make_unique<int[]>(Records::IntsFor(grown));
    list.Adopt(records.get(), ints.get(), grown);
    records_ = std::move(records);
    ints_ = std::move(ints);
  }

  std::uint32_t hash_mod_;
  std::unique_ptr<TestRecord[]> records_;
  std::unique_ptr<int[]> ints_;
};

TEST(GrantRecords, SameKeyTwiceInOneLevelMerges) {
  Transaction t;
  int a = t.Grant(1, 7, 2);
  EXPECT_EQ(t.Grant(1, 7, 3), a);
  t.Grant(1, 8, 1);
  EXPECT_EQ(t.Grant(1, 7, 4), a);
  EXPECT_EQ(t.list.Count(), 2);
  EXPECT_EQ(t.Held(1), (Refunds{{7, 9}, {8, 1}}));
  // Another limit on the same key is another record.
  t.Grant(1, 7, 5, false, 0, /*limit=*/1);
  EXPECT_EQ(t.list.Count(), 3);
}

TEST(GrantRecords, KeepAndNotKeepOfOneKeyStayApart) {
  Transaction t;
  t.Grant(1, 7, 2, /*keep=*/true);
  t.Grant(1, 7, 3, /*keep=*/false);
  t.Grant(1, 7, 4, /*keep=*/false);
  EXPECT_EQ(t.list.Count(), 2);
  EXPECT_EQ(t.Abort(), (Refunds{{7, 9}}));
}

TEST(GrantRecords, ALaterWindowReplacesTheAmount) {
  Transaction t;
  t.Grant(1, 7, 2, false, /*window=*/10);
  t.Grant(1, 7, 3, false, /*window=*/10);
  t.Grant(1, 7, 4, false, /*window=*/20);
  EXPECT_EQ(t.list.Count(), 1);
  EXPECT_EQ(t.Held(1), (Refunds{{7, 4}}));
}

TEST(GrantRecords, NotGrantedIsDropped) {
  Transaction t;
  t.Grant(1, 7, 2);
  t.NotGranted(1, 7);
  t.NotGranted(1, 9);
  EXPECT_EQ(t.list.Count(), 1);
  EXPECT_EQ(t.Abort(), (Refunds{{7, 2}}));
  EXPECT_EQ(t.list.Count(), 0);
}

TEST(GrantRecords, AReservationNotGrantedIsNotGivenBack) {
  Transaction t;
  t.Grant(1, 5, 1);
  int a = t.Reserve(1, 7);
  int b = t.Reserve(1, 8);
  t.NotGrantedAt(a);  // not the newest: left inactive
  t.Granted(b, 2);
  EXPECT_EQ(t.list.Count(), 3);
  EXPECT_EQ(t.Abort(), (Refunds{{5, 1}, {8, 2}}));
  EXPECT_EQ(t.refunds_given, 2);
}

TEST(GrantRecords, CommittedSubtransactionMergesIntoParent) {
  Transaction t;
  t.Grant(1, 7, 2);
  t.Grant(1, 8, 1);
  t.Grant(2, 7, 3);  // savepoint 2 under 1
  t.Grant(2, 9, 5);
  t.Grant(2, 10, 1, /*keep=*/true);  // given back only if 2 rolls back
  EXPECT_EQ(t.RecordsOf(2), 3);
  t.Commit(2, 1);
  EXPECT_EQ(t.RecordsOf(2), 0);
  EXPECT_EQ(t.RecordsOf(1), 3);  // 7 merged, 8, 9 moved; 10 dropped
  EXPECT_EQ(t.Held(1), (Refunds{{7, 5}, {8, 1}, {9, 5}}));
  // The index follows: another grant of 7 or 9 in 1 merges with the moved records.
  t.Grant(1, 7, 1);
  t.Grant(1, 9, 1);
  EXPECT_EQ(t.list.Count(), 3);
  EXPECT_EQ(t.Abort(), (Refunds{{7, 6}, {8, 1}, {9, 6}}));
}

TEST(GrantRecords, MergesIntoTheParentPastTheChildsOwnRecordsOfTheKey) {
  Transaction t;
  t.Grant(1, 7, 1);
  t.Grant(2, 7, 2, /*keep=*/true);
  t.Grant(2, 7, 3);  // its chain: the keep record, then the parent's
  EXPECT_EQ(t.RecordsOf(2), 2);
  t.Commit(2, 1);
  EXPECT_EQ(t.list.Count(), 1);
  EXPECT_EQ(t.Held(1), (Refunds{{7, 4}}));
}

TEST(GrantRecords, RolledBackSubtransactionGivesBackItsOwnOnce) {
  Transaction t;
  t.Grant(1, 7, 2);
  t.Grant(2, 7, 3);
  t.Grant(3, 7, 4);  // 3 under 2
  t.Grant(3, 8, 1, /*keep=*/true);
  t.Commit(3, 2);  // 7's 4 moves into 2's record; the keep one is dropped
  t.Grant(2, 9, 6, /*keep=*/true);
  EXPECT_EQ(t.RollBack(2), (Refunds{{7, 7}, {9, 6}}));
  EXPECT_EQ(t.refunds_given, 2);
  EXPECT_EQ(t.RollBack(2), Refunds{});  // once
  EXPECT_EQ(t.Held(1), (Refunds{{7, 2}}));
  // The parent's record is the key's newest again.
  EXPECT_EQ(t.Grant(1, 7, 1), 0);
  EXPECT_EQ(t.Abort(), (Refunds{{7, 3}}));
  EXPECT_EQ(t.Abort(), Refunds{});
}

TEST(GrantRecords, DeepNestingCommitsIntoOneRecordPerKey) {
  Transaction t;
  const std::uint32_t depth = 200;
  for (std::uint32_t s = 1; s <= depth; ++s) t.Grant(s, static_cast<int>(s % 3), 1);
  for (std::uint32_t s = depth; s > 1; --s) t.Commit(s, s - 1);
  EXPECT_EQ(t.list.Count(), 3);
  EXPECT_EQ(t.Held(1), (Refunds{{0, 66}, {1, 67}, {2, 67}}));
}

TEST(GrantRecords, DeepNestingRollsBackTheInnerHalf) {
  Transaction t;
  const std::uint32_t depth = 100;
  for (std::uint32_t s = 1; s <= depth; ++s) {
    t.Grant(s, static_cast<int>(s % 4), s);
    t.Grant(s, 100 + static_cast<int>(s), 1, /*keep=*/true);
  }
  for (std::uint32_t s = depth; s > 50; --s) t.Commit(s, s - 1);
  // 50 holds its own grants and those of 51..100 but their keep ones.
  Refunds expected;
  for (std::uint32_t s = 50; s <= depth; ++s) expected[static_cast<int>(s % 4)] += s;
  expected[150] = 1;
  EXPECT_EQ(t.RollBack(50), expected);
  EXPECT_EQ(t.RecordsOf(50), 0);
  Refunds rest;
  for (std::uint32_t s = 1; s < 50; ++s) {
    rest[static_cast<int>(s % 4)] += s;
    rest[100 + static_cast<int>(s)] += 1;
  }
  EXPECT_EQ(t.Abort(), rest);
}

TEST(GrantRecords, TombstonesDoNotBreakLookup) {
  Transaction t(/*hash_mod=*/3);  // every key on one of three probe paths
  for (int k = 0; k < 5; ++k) t.Grant(1, k, 1);
  const int capacity = t.list.Capacity();
  int most_tombstones = 0;
  for (std::uint32_t round = 0; round < 2000; ++round) {
    std::uint32_t sub = 2 + round;
    for (int k = 5; k < 8; ++k) t.Grant(sub, k + static_cast<int>(round % 5), 1);
    t.Grant(sub, static_cast<int>(round % 5), 1);  // a parent's key, in the child
    if (round % 3 == 0) {
      t.Commit(sub, 1);
    } else {
      Refunds given = t.RollBack(sub);
      ASSERT_EQ(given.size(), 4u);
    }
    most_tombstones = std::max(most_tombstones, t.list.Tombstones());
    ASSERT_LE(t.list.Tombstones(), t.list.Capacity());
    // Each of the parent's keys is still found: a grant of it merges.
    int before = t.list.Count();
    t.Grant(1, static_cast<int>(round % 5), 1);
    ASSERT_EQ(t.list.Count(), before) << "round " << round;
  }
  EXPECT_GT(most_tombstones, 0);  // the probe paths did hold tombstones
  // Keys 0..11 in 1; the slots were reused, not grown.
  EXPECT_EQ(t.list.Count(), 12);
  EXPECT_EQ(capacity, 8);
  EXPECT_EQ(t.list.Capacity(), 16);
  Refunds held = t.Held(1);
  double total = 0;
  for (const auto& [key, amount] : held) total += amount;
  // 5 first, 2000 in the parent, 667 committed rounds of 4.
  EXPECT_EQ(total, 5 + 2000 + 667 * 4);
}

TEST(GrantRecords, AKeyIsFoundPastATombstone) {
  Transaction t(/*hash_mod=*/1);    // one probe path for every key
  t.Grant(2, 1, 1, /*keep=*/true);  // the path's first slot
  t.Grant(2, 2, 1);                 // its second
  t.Commit(2, 1);                   // key 1 dropped: a tombstone before key 2
  EXPECT_EQ(t.list.Tombstones(), 1);
  t.Grant(1, 2, 1);
  EXPECT_EQ(t.list.Count(), 1);
  EXPECT_EQ(t.Held(1), (Refunds{{2, 2}}));
  t.Grant(1, 3, 1);  // takes the tombstone's slot
  EXPECT_EQ(t.list.Tombstones(), 0);
  t.Grant(1, 3, 1);
  t.Grant(1, 2, 1);
  EXPECT_EQ(t.list.Count(), 2);
  EXPECT_EQ(t.Abort(), (Refunds{{2, 3}, {3, 2}}));
}

TEST(GrantRecords, TombstonesAreSweptWhenTheyPileUp) {
  Transaction t;
  for (int k = 0; k < 3; ++k) t.Grant(1, k, 1);
  int most_tombstones = 0;
  for (int round = 0; round < 2000; ++round) {
    std::uint32_t sub = 2 + static_cast<std::uint32_t>(round);
    for (int j = 0; j < 4; ++j) t.Grant(sub, 1000 + 4 * round + j, 1);  // fresh keys, spread
    ASSERT_EQ(t.RollBack(sub).size(), 4u);
    most_tombstones = std::max(most_tombstones, t.list.Tombstones());
    ASSERT_LE(t.list.Tombstones(), t.list.Capacity()) << "round " << round;
    t.Grant(1, round % 3, 1);
    ASSERT_EQ(t.list.Count(), 3) << "round " << round;
  }
  EXPECT_GT(most_tombstones, 4);
  EXPECT_EQ(t.list.Capacity(), 8);
}

TEST(GrantRecords, GrowsAndKeepsEveryKey) {
  Transaction t(/*hash_mod=*/64);
  for (int k = 0; k < 1000; ++k) t.Grant(1, k, 1);
  EXPECT_GE(t.list.Capacity(), 1000);
  for (int k = 0; k < 1000; ++k) t.Grant(2, k, 2);
  EXPECT_EQ(t.list.Count(), 2000);
  t.Commit(2, 1);
  EXPECT_EQ(t.list.Count(), 1000);
  for (int k = 999; k >= 0; --k) t.Grant(1, k, 1);
  EXPECT_EQ(t.list.Count(), 1000);
  Refunds given = t.Abort();
  ASSERT_EQ(given.size(), 1000u);
  for (const auto& [key, amount] : given) EXPECT_EQ(amount, 4) << key;
  EXPECT_EQ(t.refunds_given, 1000);
}

// Random histories against a model: per open level, per key, the amounts
// that level would give back (its own and its committed children's, and
// its own "keep" ones).
TEST(GrantRecords, RandomHistoriesMatchTheModel) {
  for (std::uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    Transaction t(seed % 2 == 0 ? 5 : 0);
    // With "keep" records between them, one key's grants may take more
    // than one record of a level (a record merges only into the newest).
    const bool with_keep = seed % 3 != 0;
    struct Level {
      std::uint32_t sub;
      Refunds normal, keep;
    };
    std::vector<Level> open{{1, {}, {}}};
    std::uint32_t next_sub = 2;
    for (int step = 0; step < 400; ++step) {
      int what = static_cast<int>(rng() % 10);
      Level& top = open.back();
      if (what < 5) {
        int key = static_cast<int>(rng() % 12);
        double amount = 1 + rng() % 3;
        bool keep = with_keep && rng() % 4 == 0;
        t.Grant(top.sub, key, amount, keep);
        (keep ? top.keep : top.normal)[key] += amount;
      } else if (what < 7 && open.size() < 30) {
        open.push_back({next_sub++, {}, {}});
      } else if (what < 9 && open.size() > 1) {
        Level done = open.back();
        open.pop_back();
        t.Commit(done.sub, open.back().sub);
        for (const auto& [key, amount] : done.normal) open.back().normal[key] += amount;
      } else if (open.size() > 1) {
        Level done = open.back();
        open.pop_back();
        Refunds expected = done.normal;
        for (const auto& [key, amount] : done.keep) expected[key] += amount;
        ASSERT_EQ(t.RollBack(done.sub), expected) << "seed " << seed << " step " << step;
      }
      // Without "keep": one record per key of a level (merged).
      if (with_keep) continue;
      const Level& now = open.back();
      int normal_records = 0;
      for (int i = 0; i < t.list.Count(); ++i)
        normal_records += t.list[i].subid == now.sub && t.list[i].active && !t.list[i].keep;
      ASSERT_EQ(normal_records, static_cast<int>(now.normal.size())) << "seed " << seed << " step " << step;
    }
    Refunds all;
    for (const Level& level : open) {
      for (const auto& [key, amount] : level.normal) all[key] += amount;
      for (const auto& [key, amount] : level.keep) all[key] += amount;
    }
    ASSERT_EQ(t.Abort(), all) << "seed " << seed;
    ASSERT_EQ(t.list.Count(), 0);
  }
}

}  // namespace
