// A first-in, first-out queue on a circular buffer. It allocates only when it grows past its
// capacity (doubling) and never gives memory back, so a queue sized for its work when it is made
// allocates nothing afterwards. The remote transports keep their requests and completions in
// these: the pager's fault thread drives its connection inside fork(), where glibc holds its
// malloc locks until that thread has read the fork event (runtime/paging/uffd_backlog.h), so
// its path must not call malloc. Not thread-safe.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace tiermem {

template <typename T>
class RingQueue {
 public:
  // Room for `capacity` elements (at least 1) before the first growth.
  explicit RingQueue(size_t capacity = 64) : buf_(capacity > 0 ? capacity : 1) {}

  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  size_t capacity() const { return buf_.size(); }

  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  // The i-th element from the front (i < size()).
  T& operator[](size_t i) { return buf_[(head_ + i) % buf_.size()]; }
  const T& operator[](size_t i) const { return buf_[(head_ + i) % buf_.size()]; }

  void push_back(T v) {
    if (n_ == buf_.size()) Grow();
    buf_[(head_ + n_) % buf_.size()] = std::move(v);
    ++n_;
  }
  // Removes the front element; its slot is reset to T() so it holds nothing (an error's text).
  void pop_front() {
    buf_[head_] = T();
    head_ = (head_ + 1) % buf_.size();
    --n_;
  }
  void clear() {
    while (n_ > 0) pop_front();
    head_ = 0;
  }

  template <typename Q, typename V>
  class Iter {
   public:
    Iter(Q* q, size_t i) : q_(q), i_(i) {}
    V& operator*() const { return (*q_)[i_]; }
    V* operator->() const { return &(*q_)[i_]; }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const Iter& o) const { return i_ != o.i_; }
    bool operator==(const Iter& o) const { return i_ == o.i_; }

   private:
    Q* q_;
    size_t i_;
  };
  using iterator = Iter<RingQueue, T>;
  using const_iterator = Iter<const RingQueue, const T>;
  iterator begin() { return iterator(this, 0); }
  iterator end() { return iterator(this, n_); }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, n_); }

 private:
  void Grow() {
    std::vector<T> bigger(buf_.size() * 2);
    for (size_t i = 0; i < n_; ++i) bigger[i] = std::move((*this)[i]);
    buf_.swap(bigger);
    head_ = 0;
  }

  std::vector<T> buf_;
  size_t head_ = 0;
  size_t n_ = 0;
};

}  // namespace tiermem
