// FlatMap: what is inserted is found, what is not is not, across growth and probe chains.
#include <gtest/gtest.h>

#include <cstdint>

#include "sim/core/flat_map.hpp"

namespace rocesim {
namespace {

struct Identity {
  size_t operator()(uint64_t k) const { return static_cast<size_t>(k); }
};
struct Constant {  // every key in one slot: the whole table is one probe chain
  size_t operator()(uint64_t) const { return 7; }
};

TEST(FlatMap, FindsEveryInsertedKeyThroughGrowth) {
  // 10,000 keys force the table from 16 slots through ten doublings; every key keeps its value
  // and keys never inserted (odd ones) are not found.
  FlatMap<uint64_t, uint32_t, Identity> m;
  EXPECT_EQ(m.find(0), nullptr);
  for (uint32_t i = 0; i < 10000; ++i)
    m.insert(2 * uint64_t{i}, i);
  EXPECT_EQ(m.size(), 10000u);
  for (uint32_t i = 0; i < 10000; ++i) {
    const uint32_t* v = m.find(2 * uint64_t{i});
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(*v, i);
    EXPECT_EQ(m.find(2 * uint64_t{i} + 1), nullptr);
  }
}

TEST(FlatMap, ReservedRoomHoldsWhatIsInserted) {
  FlatMap<uint64_t, uint32_t, Identity> m;
  m.reserve(1000);
  for (uint32_t i = 0; i < 1000; ++i)
    m.insert(uint64_t{i} * 16, i);  // every key on a slot that is a multiple of 16
  for (uint32_t i = 0; i < 1000; ++i) {
    ASSERT_NE(m.find(uint64_t{i} * 16), nullptr);
    EXPECT_EQ(*m.find(uint64_t{i} * 16), i);
  }
  EXPECT_EQ(m.find(8), nullptr);
}

TEST(FlatMap, CollidingKeysShareOneProbeChain) {
  FlatMap<uint64_t, uint64_t, Constant> m;
  for (uint64_t k = 100; k < 200; ++k)
    m.insert(k, k * k);
  for (uint64_t k = 100; k < 200; ++k) {
    ASSERT_NE(m.find(k), nullptr);
    EXPECT_EQ(*m.find(k), k * k);
  }
  EXPECT_EQ(m.find(99), nullptr);
  EXPECT_EQ(m.find(200), nullptr);
}

TEST(FlatMap, TryInsertKeepsTheFirstValueAndClearForgetsAll) {
  // On one probe chain (Constant hash): a key already there keeps its value and reports false;
  // after clear() nothing is found and the keys can be stored again.
  FlatMap<uint64_t, uint64_t, Constant> m;
  for (uint64_t k = 0; k < 50; ++k)
    EXPECT_TRUE(m.try_insert(k, k + 1));
  for (uint64_t k = 0; k < 50; ++k)
    EXPECT_FALSE(m.try_insert(k, 0));
  EXPECT_EQ(m.size(), 50u);
  for (uint64_t k = 0; k < 50; ++k) {
    ASSERT_NE(m.find(k), nullptr);
    EXPECT_EQ(*m.find(k), k + 1);
  }
  m.clear();
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.find(7), nullptr);
  EXPECT_TRUE(m.try_insert(7, 70));
  EXPECT_EQ(*m.find(7), 70u);
}

}  // namespace
}  // namespace rocesim
