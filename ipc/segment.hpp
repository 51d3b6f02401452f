#pragma once

/// @file segment.hpp
/// The shared-memory segment (a memfd) that holds both rings of one worker.
/// Layout in docs/wire.md.

#include <cstddef>
#include <cstdint>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::ipc {

inline constexpr uint32_t segment_magic = 0x4C545343; // "CSTL" little-endian
inline constexpr uint32_t segment_version = 1;
inline constexpr std::size_t segment_header_size = 4096;
inline constexpr uint32_t min_ring_capacity = 4096;
inline constexpr uint32_t max_ring_capacity = 64u << 20;

/// Offsets of the index words (each on its own cache line).
inline constexpr std::size_t to_worker_head_offset = 64;
inline constexpr std::size_t to_worker_tail_offset = 128;
inline constexpr std::size_t to_supervisor_head_offset = 192;
inline constexpr std::size_t to_supervisor_tail_offset = 256;

enum class direction : uint8_t { to_worker, to_supervisor };

/// Owns the memfd and its read-write mapping. Move-only; unmaps and closes.
class segment {
public:
  /// Creates a sealed-size memfd of `4096 + 2 * capacity` bytes, maps it and
  /// writes the header. `capacity` must be a power of two in
  /// [min_ring_capacity, max_ring_capacity].
  static outcome<segment> create(uint32_t capacity);

  /// Maps an existing segment fd (the worker side, and tests) and validates
  /// magic, version, capacity and the fd's size. Takes ownership of `fd`.
  static outcome<segment> attach(unique_fd fd);

  segment(segment&& other) noexcept;
  segment& operator=(segment&& other) noexcept;
  segment(const segment&) = delete;
  segment& operator=(const segment&) = delete;
  ~segment();

  int fd() const noexcept { return fd_.get(); }
  uint32_t capacity() const noexcept { return capacity_; }
  std::size_t size() const noexcept { return size_; }
  std::byte* base() const noexcept { return base_; }

  /// The data area of one ring.
  std::byte* data(direction dir) const noexcept;
  /// The index words of one ring (4-byte aligned, for atomic_ref-style access).
  uint32_t* head_word(direction dir) const noexcept;
  uint32_t* tail_word(direction dir) const noexcept;

private:
  segment(unique_fd fd, std::byte* base, std::size_t size, uint32_t capacity) noexcept;
  void unmap() noexcept;

  unique_fd fd_;
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  uint32_t capacity_ = 0;
};

} // namespace castellan::ipc
