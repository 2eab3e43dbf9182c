// A hash map for many small entries that are only added, looked up and cleared all at once:
// open addressing with linear probing in one array of slots, doubled when half full. Where a
// node-based map pays an allocation per entry and a pointer chase per lookup (a million
// point-to-point connections of an AlltoAll), this costs one probe sequence in contiguous memory.
// The hash's low bits index the slots: keys whose low bits repeat need a mixing hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace rocesim {

template <typename Key, typename Value, typename Hash>
class FlatMap {
 public:
  /// The value stored under `k`, or null.
  const Value* find(const Key& k) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = home(k);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == k) return &s.value;
    }
  }
  /// Stores `v` under `k`, which must not be there yet.
  void insert(const Key& k, Value v) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    place(k, std::move(v));
    ++size_;
  }
  /// Stores `v` under `k` unless `k` is there already (then false, the table unchanged): one
  /// probe sequence for what find-then-insert does in two.
  bool try_insert(const Key& k, Value v) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    size_t i = home(k);
    for (; slots_[i].used; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == k) return false;
    }
    slots_[i] = Slot{k, std::move(v), true};
    ++size_;
    return true;
  }
  size_t size() const { return size_; }
  /// Forgets every entry (keeps the slots' memory).
  void clear() {
    for (Slot& s : slots_)
      s = Slot{};
    size_ = 0;
  }
  /// Makes room for `n` entries without growing on the way.
  void reserve(size_t n) {
    size_t slots = 16;
    while (slots < 2 * n)
      slots *= 2;
    if (slots > slots_.size()) rehash(slots);
  }

 private:
  struct Slot {
    Key key{};
    Value value{};
    bool used = false;
  };
  size_t home(const Key& k) const { return Hash{}(k) & (slots_.size() - 1); }
  void place(const Key& k, Value v) {
    size_t i = home(k);
    while (slots_[i].used)
      i = (i + 1) & (slots_.size() - 1);
    slots_[i] = Slot{k, std::move(v), true};
  }
  void grow() { rehash(slots_.empty() ? 16 : 2 * slots_.size()); }
  void rehash(size_t slots) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(slots, Slot{});
    for (Slot& s : old) {
      if (s.used) place(s.key, std::move(s.value));
    }
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace rocesim
