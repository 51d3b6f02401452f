/// @file segment_test.cpp
/// Segment creation (layout, seals) and attach validation.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ipc/frame.hpp"
#include "ipc/segment.hpp"

using namespace castellan;
using namespace castellan::ipc;

namespace {

segment make_segment(uint32_t capacity) {
  auto seg = segment::create(capacity);
  BOOST_REQUIRE_MESSAGE(seg.has_value(),
                        (seg.has_value() ? std::string() : seg.error().describe()));
  return std::move(*seg);
}

unique_fd dup_fd(int fd) {
  unique_fd copy{::fcntl(fd, F_DUPFD_CLOEXEC, 0)};
  BOOST_REQUIRE(copy.valid());
  return copy;
}

/// A memfd of `size` bytes whose first 12 bytes are the given header words.
unique_fd raw_memfd(std::size_t size, uint32_t magic, uint32_t version, uint32_t capacity) {
  unique_fd fd{::memfd_create("test-segment", MFD_CLOEXEC)};
  BOOST_REQUIRE(fd.valid());
  BOOST_REQUIRE(::ftruncate(fd.get(), static_cast<off_t>(size)) == 0);
  if (size >= 12) {
    unsigned char header[12];
    store_le32(header, magic);
    store_le32(header + 4, version);
    store_le32(header + 8, capacity);
    BOOST_REQUIRE(::pwrite(fd.get(), header, sizeof header, 0) == 12);
  }
  return fd;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(segments)

BOOST_AUTO_TEST_CASE(create_writes_layout) {
  auto seg = make_segment(8192);
  BOOST_TEST(seg.capacity() == 8192u);
  BOOST_TEST(seg.size() == 4096u + 2u * 8192u);
  BOOST_TEST(load_le32(seg.base()) == 0x4C545343u);
  BOOST_TEST(std::memcmp(seg.base(), "CSTL", 4) == 0);
  BOOST_TEST(load_le32(seg.base() + 4) == 1u);
  BOOST_TEST(load_le32(seg.base() + 8) == 8192u);
  for (std::size_t i = 12; i < 4096; ++i)
    BOOST_REQUIRE(seg.base()[i] == std::byte{0});
  BOOST_TEST(seg.data(direction::to_worker) == seg.base() + 4096);
  BOOST_TEST(seg.data(direction::to_supervisor) == seg.base() + 4096 + 8192);
  BOOST_TEST(static_cast<void*>(seg.head_word(direction::to_worker)) ==
             static_cast<void*>(seg.base() + 64));
  BOOST_TEST(static_cast<void*>(seg.tail_word(direction::to_worker)) ==
             static_cast<void*>(seg.base() + 128));
  BOOST_TEST(static_cast<void*>(seg.head_word(direction::to_supervisor)) ==
             static_cast<void*>(seg.base() + 192));
  BOOST_TEST(static_cast<void*>(seg.tail_word(direction::to_supervisor)) ==
             static_cast<void*>(seg.base() + 256));
}

BOOST_AUTO_TEST_CASE(create_seals_the_size) {
  auto seg = make_segment(4096);
  const int seals = ::fcntl(seg.fd(), F_GET_SEALS);
  BOOST_TEST(seals == (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
  BOOST_TEST(::ftruncate(seg.fd(), 100) == -1);
  BOOST_TEST(errno == EPERM);
  BOOST_TEST(::ftruncate(seg.fd(), 1 << 20) == -1);
  BOOST_TEST(errno == EPERM);
  BOOST_TEST((::fcntl(seg.fd(), F_GETFD) & FD_CLOEXEC) == FD_CLOEXEC);
}

BOOST_AUTO_TEST_CASE(create_refuses_bad_capacity) {
  for (uint32_t bad : {0u, 2048u, 4095u, 6000u, 4097u, 128u << 20, 0x80000000u}) {
    auto seg = segment::create(bad);
    BOOST_REQUIRE(!seg.has_value());
    BOOST_TEST(seg.error().code == EINVAL);
    BOOST_TEST(contains(seg.error().message, std::to_string(bad)));
  }
  BOOST_TEST(segment::create(4096).has_value());
  BOOST_TEST(segment::create(64u << 20).has_value());
}

BOOST_AUTO_TEST_CASE(attach_shares_memory) {
  auto seg = make_segment(4096);
  auto other = segment::attach(dup_fd(seg.fd()));
  BOOST_REQUIRE(other.has_value());
  BOOST_TEST(other->capacity() == 4096u);
  BOOST_TEST(other->size() == seg.size());
  std::memcpy(seg.data(direction::to_supervisor), "hello", 5);
  BOOST_TEST(std::memcmp(other->data(direction::to_supervisor), "hello", 5) == 0);
  *other->tail_word(direction::to_worker) = 77;
  BOOST_TEST(*seg.tail_word(direction::to_worker) == 77u);
}

BOOST_AUTO_TEST_CASE(attach_refuses_bad_magic) {
  auto seg = make_segment(4096);
  std::memcpy(seg.base(), "XSTL", 4);
  auto other = segment::attach(dup_fd(seg.fd()));
  BOOST_REQUIRE(!other.has_value());
  BOOST_TEST(other.error().message == "segment magic 1280594776 is not 1280594755 (\"CSTL\")");
}

BOOST_AUTO_TEST_CASE(attach_refuses_bad_version) {
  auto seg = make_segment(4096);
  store_le32(seg.base() + 4, 2);
  auto other = segment::attach(dup_fd(seg.fd()));
  BOOST_REQUIRE(!other.has_value());
  BOOST_TEST(other.error().message == "segment layout version 2 is not supported (expected 1)");
}

BOOST_AUTO_TEST_CASE(attach_refuses_bad_capacity) {
  // Not a power of two, too small, too large: the size is made to match so
  // that only the capacity check can refuse it.
  for (uint32_t bad : {6000u, 2048u, 128u << 20}) {
    auto fd = raw_memfd(4096 + 2 * std::size_t{bad}, segment_magic, segment_version, bad);
    auto other = segment::attach(std::move(fd));
    BOOST_REQUIRE(!other.has_value());
    BOOST_TEST(other.error().message == "segment ring capacity " + std::to_string(bad) +
                                            " is not a power of two in [4096, 67108864]");
  }
}

BOOST_AUTO_TEST_CASE(attach_refuses_bad_size) {
  auto small = segment::attach(raw_memfd(4096 + 4096, segment_magic, segment_version, 4096));
  BOOST_REQUIRE(!small.has_value());
  BOOST_TEST(small.error().message == "segment is 8192 bytes, capacity 4096 needs 12288");
  auto big = segment::attach(raw_memfd(4096 + 3 * 4096, segment_magic, segment_version, 4096));
  BOOST_REQUIRE(!big.has_value());
  BOOST_TEST(big.error().message == "segment is 16384 bytes, capacity 4096 needs 12288");
  auto tiny = segment::attach(raw_memfd(8, 0, 0, 0));
  BOOST_REQUIRE(!tiny.has_value());
  BOOST_TEST(tiny.error().message == "segment of 8 bytes is too small for its header");
  auto ok = segment::attach(raw_memfd(4096 + 2 * 4096, segment_magic, segment_version, 4096));
  BOOST_TEST(ok.has_value());
}

BOOST_AUTO_TEST_CASE(attach_refuses_non_memory_fds) {
  int p[2];
  BOOST_REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  unique_fd write_end{p[1]};
  auto piped = segment::attach(unique_fd{p[0]});
  BOOST_REQUIRE(!piped.has_value());
  BOOST_TEST(piped.error().code == EINVAL);
  BOOST_TEST(contains(piped.error().message, "is not a memory file"));
  auto none = segment::attach(unique_fd{});
  BOOST_REQUIRE(!none.has_value());
  BOOST_TEST(none.error().code == EBADF);
  auto closed = segment::attach(unique_fd{1000});
  BOOST_REQUIRE(!closed.has_value());
  BOOST_TEST(closed.error().code == EBADF);
}

BOOST_AUTO_TEST_CASE(move_transfers_ownership) {
  auto seg = make_segment(4096);
  std::byte* base = seg.base();
  const int fd = seg.fd();
  segment moved = std::move(seg);
  BOOST_TEST(moved.base() == base);
  BOOST_TEST(moved.fd() == fd);
  BOOST_TEST(seg.base() == nullptr);
  BOOST_TEST(seg.fd() == -1);
  segment assigned = make_segment(8192);
  assigned = std::move(moved);
  BOOST_TEST(assigned.base() == base);
  BOOST_TEST(assigned.capacity() == 4096u);
}

BOOST_AUTO_TEST_SUITE_END()
