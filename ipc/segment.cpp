/// @file segment.cpp
/// The memfd segment: creation (supervisor), attachment with validation
/// (worker, tests), and the pointers into its layout.

#include "ipc/segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "ipc/frame.hpp"

namespace castellan::ipc {

namespace {

constexpr std::size_t magic_offset = 0;
constexpr std::size_t version_offset = 4;
constexpr std::size_t capacity_offset = 8;
constexpr std::size_t header_fields_size = 12;

bool is_valid_capacity(uint32_t capacity) noexcept {
  return capacity >= min_ring_capacity && capacity <= max_ring_capacity &&
         (capacity & (capacity - 1)) == 0;
}

std::size_t segment_size_for(uint32_t capacity) noexcept {
  return segment_header_size + 2 * static_cast<std::size_t>(capacity);
}

outcome<std::byte*> map_shared(int fd, std::size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return errno_failure("mmap segment of " + std::to_string(size) + " bytes");
  return static_cast<std::byte*>(p);
}

} // namespace

segment::segment(unique_fd fd, std::byte* base, std::size_t size, uint32_t capacity) noexcept
    : fd_(std::move(fd)), base_(base), size_(size), capacity_(capacity) {}

segment::segment(segment&& other) noexcept
    : fd_(std::move(other.fd_)), base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)), capacity_(std::exchange(other.capacity_, 0)) {}

segment& segment::operator=(segment&& other) noexcept {
  if (this != &other) {
    unmap();
    fd_ = std::move(other.fd_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

segment::~segment() {
  unmap();
}

void segment::unmap() noexcept {
  if (base_ != nullptr)
    ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

outcome<segment> segment::create(uint32_t capacity) {
  if (!is_valid_capacity(capacity))
    return failure{EINVAL, "ring capacity " + std::to_string(capacity) +
                               " is not a power of two in [4096, 67108864]"};
  unique_fd fd{::memfd_create("castellan-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING)};
  if (!fd)
    return errno_failure("memfd_create");
  const std::size_t size = segment_size_for(capacity);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
    return errno_failure("ftruncate segment to " + std::to_string(size) + " bytes");
  // A worker that could shrink the memfd would make the supervisor's next
  // access to the mapping fault (SIGBUS); the seals make the size final.
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return errno_failure("seal segment");
  auto base = map_shared(fd.get(), size);
  if (!base)
    return base.error();
  // The memfd is zero-filled, so indices and the reserved bytes start at 0.
  store_le32(*base + magic_offset, segment_magic);
  store_le32(*base + version_offset, segment_version);
  store_le32(*base + capacity_offset, capacity);
  return segment{std::move(fd), *base, size, capacity};
}

outcome<segment> segment::attach(unique_fd fd) {
  if (!fd)
    return failure{EBADF, "attach segment: no file descriptor"};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return errno_failure("fstat segment fd " + std::to_string(fd.get()));
  if (!S_ISREG(st.st_mode))
    return failure{EINVAL, "segment fd " + std::to_string(fd.get()) + " is not a memory file"};
  // Read the header with pread rather than through a mapping: the size is
  // not validated yet, and mapping past the end of a file faults.
  unsigned char header[header_fields_size];
  const ssize_t n = ::pread(fd.get(), header, sizeof header, 0);
  if (n < 0)
    return errno_failure("read segment header");
  if (static_cast<std::size_t>(n) != sizeof header)
    return logic_failure("segment of " + std::to_string(st.st_size) +
                         " bytes is too small for its header");
  const uint32_t magic = load_le32(header + magic_offset);
  if (magic != segment_magic)
    return logic_failure("segment magic " + std::to_string(magic) + " is not " +
                         std::to_string(segment_magic) + " (\"CSTL\")");
  const uint32_t version = load_le32(header + version_offset);
  if (version != segment_version)
    return logic_failure("segment layout version " + std::to_string(version) +
                         " is not supported (expected " + std::to_string(segment_version) + ")");
  const uint32_t capacity = load_le32(header + capacity_offset);
  if (!is_valid_capacity(capacity))
    return logic_failure("segment ring capacity " + std::to_string(capacity) +
                         " is not a power of two in [4096, 67108864]");
  const std::size_t size = segment_size_for(capacity);
  if (st.st_size < 0 || static_cast<std::size_t>(st.st_size) != size)
    return logic_failure("segment is " + std::to_string(st.st_size) + " bytes, capacity " +
                         std::to_string(capacity) + " needs " + std::to_string(size));
  auto base = map_shared(fd.get(), size);
  if (!base)
    return base.error();
  return segment{std::move(fd), *base, size, capacity};
}

std::byte* segment::data(direction dir) const noexcept {
  const std::size_t offset =
      segment_header_size + (dir == direction::to_worker ? 0 : std::size_t{capacity_});
  return base_ + offset;
}

uint32_t* segment::head_word(direction dir) const noexcept {
  const std::size_t offset =
      dir == direction::to_worker ? to_worker_head_offset : to_supervisor_head_offset;
  // The offsets are multiples of 64 in a page-aligned mapping, so the cast
  // yields a properly aligned u32 for the atomic accesses of the rings.
  return static_cast<uint32_t*>(static_cast<void*>(base_ + offset));
}

uint32_t* segment::tail_word(direction dir) const noexcept {
  const std::size_t offset =
      dir == direction::to_worker ? to_worker_tail_offset : to_supervisor_tail_offset;
  return static_cast<uint32_t*>(static_cast<void*>(base_ + offset));
}

} // namespace castellan::ipc
