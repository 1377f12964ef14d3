#pragma once
// Owning arrays in an executor's memory space, and copies between spaces.

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/common.hpp"
#include "kernels/executor.hpp"

namespace recon::kernels {

namespace detail {
/// Allocates `bytes` in the executor's memory space (host for the CPU,
/// device memory for CUDA). Throws std::bad_alloc / std::runtime_error.
void* allocate(const Executor& exec, std::size_t bytes);
/// Frees memory from allocate(); never throws.
void deallocate(const Executor& exec, void* ptr) noexcept;
/// Copies between any two memory spaces. Asynchronous on the destination's
/// (or, for device->host, the source's) stream when CUDA is involved;
/// call Executor::synchronize() before reading a host destination.
void copy_bytes(const Executor& dst_exec, void* dst, const Executor& src_exec,
                const void* src, std::size_t bytes);
}  // namespace detail

/// Move-only owner of `size` elements of trivially copyable T in the memory
/// space of `exec`. Contents are uninitialized after construction.
template <class T>
class Array {
public:
    Array() = default;
    Array(const Executor& exec, size_type size) : exec_{exec}, size_{size}
    {
        if (size_ > 0) {
            data_ = static_cast<T*>(
                detail::allocate(exec_, static_cast<std::size_t>(size_) * sizeof(T)));
        }
    }
    /// Copies a host vector into the executor's memory space.
    Array(const Executor& exec, const std::vector<T>& host)
        : Array(exec, static_cast<size_type>(host.size()))
    {
        if (size_ > 0) {
            detail::copy_bytes(exec_, data_, Executor::cpu(), host.data(),
                               host.size() * sizeof(T));
        }
    }
    Array(const Array&) = delete;
    Array& operator=(const Array&) = delete;
    Array(Array&& other) noexcept
        : exec_{other.exec_},
          size_{std::exchange(other.size_, 0)},
          data_{std::exchange(other.data_, nullptr)}
    {}
    Array& operator=(Array&& other) noexcept
    {
        if (this != &other) {
            release();
            exec_ = other.exec_;
            size_ = std::exchange(other.size_, 0);
            data_ = std::exchange(other.data_, nullptr);
        }
        return *this;
    }
    ~Array() { release(); }

    const Executor& executor() const { return exec_; }
    size_type size() const { return size_; }
    T* data() { return data_; }
    const T* data() const { return data_; }
    View<T> view() { return {data_, size_}; }
    View<const T> view() const { return {data_, size_}; }

    /// Copies the contents to a host vector (synchronizes the executor).
    std::vector<T> to_host() const
    {
        std::vector<T> host(static_cast<std::size_t>(size_));
        if (size_ > 0) {
            detail::copy_bytes(Executor::cpu(), host.data(), exec_, data_,
                               host.size() * sizeof(T));
            exec_.synchronize();
        }
        return host;
    }

private:
    void release() noexcept
    {
        if (data_ != nullptr) detail::deallocate(exec_, data_);
        data_ = nullptr;
        size_ = 0;
    }

    Executor exec_ = Executor::cpu();
    size_type size_ = 0;
    T* data_ = nullptr;
};

/// Copies `count` elements between views in (possibly) different spaces.
template <class T>
void copy(const Executor& dst_exec, View<T> dst, const Executor& src_exec,
          View<const T> src)
{
    detail::copy_bytes(dst_exec, dst.data, src_exec, src.data,
                       static_cast<std::size_t>(src.size) * sizeof(T));
}

}  // namespace recon::kernels
