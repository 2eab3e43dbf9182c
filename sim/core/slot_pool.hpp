// A vector whose elements are reused: acquire() hands out the most recently released slot
// (still warm in cache) or appends a new one; release() returns a slot. Indices stay valid while
// acquired, so they serve as handles (flows, transfers) that other tables can refer to.
#pragma once

#include <cstdint>
#include <vector>

namespace rocesim {

template <typename T>
class SlotPool {
 public:
  uint32_t acquire() {
    if (!free_.empty()) {
      const uint32_t slot = free_.back();
      free_.pop_back();
      return slot;
    }
    items_.emplace_back();
    return static_cast<uint32_t>(items_.size() - 1);
  }
  void release(uint32_t slot) { free_.push_back(slot); }

  T& operator[](uint32_t slot) { return items_[slot]; }
  const T& operator[](uint32_t slot) const { return items_[slot]; }
  /// Slots ever handed out (acquired or free).
  size_t capacity() const { return items_.size(); }

 private:
  std::vector<T> items_;
  std::vector<uint32_t> free_;
};

}  // namespace rocesim
