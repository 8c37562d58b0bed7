// SmallVector<T, N>: a vector that keeps up to N elements inline.
//
// The commands a task's path emits (ClaimLeases, AssignTask, ReleaseLeases)
// each carry a short list: one or two lease keys, a few core ids, zero or
// one GPU grant. As std::vector every one of them was a heap allocation and
// a free, which dominated the core's cost per placement (BENCH.md B1). A
// SmallVector holds the first N elements in the object itself and moves to
// the heap only beyond that, so the common path allocates nothing.
//
// It reads like std::vector where the shell uses it: begin/end (plain
// pointers, so it is a contiguous range and converts to std::span),
// size/empty/operator[]/data/front/back, push_back/emplace_back/pop_back,
// clear/reserve/resize/assign/insert at the end, construction from an
// initializer list or a std::vector, comparison with another SmallVector or
// a std::vector, and an implicit conversion to std::vector for code that
// stores one (`std::vector<uint32_t> cores = assign.cores;`).
//
// Only trivially copyable element types (ids, keys, grants): copies are
// memcpy and nothing is destroyed element by element.
//
// Thread safety: a plain value.
#ifndef DROVER_CORE_SMALL_VECTOR_H_
#define DROVER_CORE_SMALL_VECTOR_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <type_traits>
#include <vector>

namespace drover::core {

template <typename T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable types");
  static_assert(N > 0, "SmallVector needs an inline capacity");

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() = default;
  SmallVector(std::initializer_list<T> init) { assign(init.begin(), init.end()); }
  template <std::input_iterator It>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  // Implicit, so `command.keys = some_std_vector;` keeps compiling.
  SmallVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT
  SmallVector(const SmallVector& other) { assign(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { Steal(other); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      Release();
      Steal(other);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> init) {
    assign(init.begin(), init.end());
    return *this;
  }
  ~SmallVector() { Release(); }

  // Implicit, for code that keeps its own std::vector copy.
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT

  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }

  T* data() { return heap_ != nullptr ? heap_ : InlineData(); }
  const T* data() const { return heap_ != nullptr ? heap_ : InlineData(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }
  static constexpr size_t inline_capacity() { return N; }
  // True when the elements live on the heap (more than N were ever reserved).
  bool on_heap() const { return heap_ != nullptr; }

  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void clear() { size_ = 0; }
  void reserve(size_t n) {
    if (n > capacity_) Grow(n);
  }
  void resize(size_t n) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) new (data() + i) T();
    size_ = static_cast<uint32_t>(n);
  }
  void push_back(const T& value) {
    if (size_ == capacity_) {
      const T copy = value;  // `value` may live in this vector
      Grow(capacity_ * 2);
      new (data() + size_++) T(copy);
      return;
    }
    new (data() + size_++) T(value);
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) Grow(capacity_ * 2);
    T* slot = new (data() + size_) T(std::forward<Args>(args)...);
    ++size_;
    return *slot;
  }
  void pop_back() { --size_; }

  template <std::input_iterator It>
  void assign(It first, It last) {
    const size_t n = static_cast<size_t>(std::distance(first, last));
    size_ = 0;
    reserve(n);
    std::copy(first, last, data());
    size_ = static_cast<uint32_t>(n);
  }
  // Appends [first, last) at `pos`, which must be end().
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const size_t at = static_cast<size_t>(pos - begin());
    const size_t n = static_cast<size_t>(std::distance(first, last));
    reserve(size_ + n);
    std::copy_backward(begin() + at, end(), end() + n);
    std::copy(first, last, begin() + at);
    size_ += static_cast<uint32_t>(n);
    return begin() + at;
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const SmallVector& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  T* InlineData() { return std::launder(reinterpret_cast<T*>(inline_)); }
  const T* InlineData() const { return std::launder(reinterpret_cast<const T*>(inline_)); }

  void Grow(size_t n) {
    n = std::max(n, size_t{2} * N);
    T* fresh = static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{alignof(T)}));
    if (size_ != 0) std::memcpy(static_cast<void*>(fresh), data(), size_ * sizeof(T));
    Release();
    heap_ = fresh;
    capacity_ = static_cast<uint32_t>(n);
  }
  void Release() {
    if (heap_ != nullptr) ::operator delete(heap_, std::align_val_t{alignof(T)});
    heap_ = nullptr;
    capacity_ = N;
  }
  // Takes other's elements (its heap block, or a copy of its inline ones)
  // and leaves it empty. `this` holds nothing on the heap.
  void Steal(SmallVector& other) {
    size_ = other.size_;
    if (other.heap_ != nullptr) {
      heap_ = other.heap_;
      capacity_ = other.capacity_;
      other.heap_ = nullptr;
      other.capacity_ = N;
    } else if (size_ != 0) {
      std::memcpy(inline_, other.inline_, size_ * sizeof(T));
    }
    other.size_ = 0;
  }

  T* heap_ = nullptr;
  uint32_t size_ = 0;
  uint32_t capacity_ = N;
  alignas(T) unsigned char inline_[N * sizeof(T)];
};

}  // namespace drover::core

#endif  // DROVER_CORE_SMALL_VECTOR_H_
