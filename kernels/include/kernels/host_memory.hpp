#pragma once
// Page-locked ("pinned") host memory: what an asynchronous copy between the
// host and a CUDA device needs to overlap with other work. No CUDA header
// here; a build without CUDA, or a machine without a device, gets ordinary
// heap memory with the same interface.

#include <cstddef>
#include <type_traits>
#include <utility>

#include "kernels/common.hpp"

namespace recon::kernels {

namespace detail {
/// Allocates `bytes` of host memory: page-locked (cudaHostAlloc, usable by
/// every device) when a CUDA device is present, else 64-byte aligned heap
/// memory. Sets `page_locked` to say which. Throws std::bad_alloc (heap) or
/// std::runtime_error (CUDA error).
void* allocate_host(std::size_t bytes, bool& page_locked);
/// Frees memory from allocate_host(); never throws.
void deallocate_host(void* ptr, bool page_locked) noexcept;
}  // namespace detail

/// Move-only owner of `size` elements of trivially copyable T in host memory
/// that CUDA copies can read and write asynchronously (see allocate_host).
/// Contents are uninitialized after construction. Pass view() to
/// kernels::copy with Executor::cpu() as the host side; the copy is then
/// queued on the device side's stream and the host must not touch the
/// elements until that stream has passed it (an Event says when).
template <class T>
class PinnedArray {
    static_assert(std::is_trivially_copyable_v<T>, "PinnedArray holds trivially copyable types");

public:
    PinnedArray() = default;
    explicit PinnedArray(size_type size) : size_{size}
    {
        if (size_ > 0) {
            data_ = static_cast<T*>(detail::allocate_host(
                static_cast<std::size_t>(size_) * sizeof(T), page_locked_));
        }
    }
    PinnedArray(const PinnedArray&) = delete;
    PinnedArray& operator=(const PinnedArray&) = delete;
    PinnedArray(PinnedArray&& other) noexcept
        : size_{std::exchange(other.size_, 0)},
          data_{std::exchange(other.data_, nullptr)},
          page_locked_{std::exchange(other.page_locked_, false)}
    {}
    PinnedArray& operator=(PinnedArray&& other) noexcept
    {
        if (this != &other) {
            release();
            size_ = std::exchange(other.size_, 0);
            data_ = std::exchange(other.data_, nullptr);
            page_locked_ = std::exchange(other.page_locked_, false);
        }
        return *this;
    }
    ~PinnedArray() { release(); }

    size_type size() const { return size_; }
    T* data() { return data_; }
    const T* data() const { return data_; }
    T& operator[](size_type i) { return data_[i]; }
    const T& operator[](size_type i) const { return data_[i]; }
    View<T> view() { return {data_, size_}; }
    View<const T> view() const { return {data_, size_}; }
    /// True when the memory is page-locked (a CUDA device was present).
    bool page_locked() const { return page_locked_; }

private:
    void release() noexcept
    {
        if (data_ != nullptr) detail::deallocate_host(data_, page_locked_);
        data_ = nullptr;
        size_ = 0;
        page_locked_ = false;
    }

    size_type size_ = 0;
    T* data_ = nullptr;
    bool page_locked_ = false;
};

}  // namespace recon::kernels
