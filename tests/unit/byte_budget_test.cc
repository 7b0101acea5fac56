// ByteBudget: what many holders take together never passes the total.
#include "common/byte_budget.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace slotd {
namespace {

TEST(ByteBudget, WhatAllHoldersTakeTogetherNeverPassesTheTotalAndGivenBackIsTakenAgain) {
  ByteBudget budget(100);
  EXPECT_EQ(budget.Take(60), 60u);
  EXPECT_EQ(budget.Take(60), 40u);  // only what is left
  EXPECT_EQ(budget.Take(1), 0u);
  budget.Give(50);
  EXPECT_EQ(budget.Take(70), 50u);

  ByteBudget shared(1000);
  std::vector<size_t> taken(8, 0);
  std::vector<std::thread> holders;
  for (size_t i = 0; i < taken.size(); ++i)
    holders.emplace_back([&, i] {
      for (int n = 0; n < 1000; ++n) taken[i] += shared.Take(7);
    });
  for (auto& t : holders) t.join();
  size_t total = 0;
  for (size_t t : taken) total += t;
  EXPECT_EQ(total, 1000u);
}

}  // namespace
}  // namespace slotd
