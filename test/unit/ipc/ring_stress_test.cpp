/// @file ring_stress_test.cpp
/// A producer and a consumer thread move a million frames of random sizes
/// through a small ring (so it is full, empty and wrapping constantly); the
/// checksums of both sides must match.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <string>
#include <string_view>
#include <thread>

#include "ipc/ring.hpp"

using namespace castellan::ipc;
using castellan::ipc::message_type;

namespace {

constexpr uint32_t frame_count = 1'000'000;

/// splitmix64: a deterministic, seedable generator.
struct rng {
  uint64_t state;
  uint64_t next() noexcept {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

/// FNV-1a over the request id and the payload.
void mix(uint64_t& h, uint32_t id, std::string_view payload) noexcept {
  auto step = [&h](unsigned char c) {
    h ^= c;
    h *= 0x100000001B3ull;
  };
  for (int i = 0; i < 4; ++i)
    step(static_cast<unsigned char>(id >> (8 * i)));
  for (char c : payload)
    step(static_cast<unsigned char>(c));
}

} // namespace

BOOST_AUTO_TEST_SUITE(ring_stress)

BOOST_AUTO_TEST_CASE(two_threads_one_million_frames) {
  auto seg = segment::create(64 * 1024);
  BOOST_REQUIRE(seg.has_value());
  std::atomic<bool> abort{false};
  uint64_t produced_sum = 0xCBF29CE484222325ull;
  uint64_t produced_bytes = 0;

  // Payloads are random slices of a random pool: generating a fresh byte
  // stream for every frame would dominate the run time.
  std::string pool(256 * 1024, '\0');
  {
    rng r{7};
    for (auto& c : pool)
      c = static_cast<char>(r.next());
  }

  std::thread producer([&] {
    ring_writer w{*seg, direction::to_supervisor};
    rng r{42};
    bool have_payload = false;
    std::string_view payload;
    for (uint32_t i = 0; i < frame_count && !abort.load(std::memory_order_relaxed);) {
      if (!have_payload) {
        // Sizes 0..511, and now and then one near the ring's limit.
        const uint64_t roll = r.next();
        std::size_t size = static_cast<std::size_t>(roll % 512);
        if (roll % 1000 == 0)
          size = w.max_payload() - static_cast<std::size_t>(roll % 100);
        const std::size_t offset = static_cast<std::size_t>(r.next() % (pool.size() - size));
        payload = std::string_view(pool).substr(offset, size);
        have_payload = true;
      }
      const auto st = w.write(message_type::stdout_data, i, payload);
      if (st == ring_status::ok) {
        mix(produced_sum, i, payload);
        produced_bytes += payload.size();
        have_payload = false;
        ++i;
      } else if (st == ring_status::full) {
        std::this_thread::yield();
      } else {
        abort = true;
      }
    }
  });

  uint64_t consumed_sum = 0xCBF29CE484222325ull;
  uint64_t consumed_bytes = 0;
  uint32_t expected_id = 0;
  std::string error;
  {
    ring_reader r{*seg, direction::to_supervisor};
    while (expected_id < frame_count && !abort.load(std::memory_order_relaxed)) {
      auto res = r.read();
      if (res.status == ring_status::empty) {
        std::this_thread::yield();
        continue;
      }
      if (res.status != ring_status::ok || res.value.request_id != expected_id) {
        error = res.status != ring_status::ok
                    ? res.error
                    : "frame " + std::to_string(res.value.request_id) + " where " +
                          std::to_string(expected_id) + " was expected";
        abort = true;
        break;
      }
      mix(consumed_sum, res.value.request_id, res.value.payload);
      consumed_bytes += res.value.payload.size();
      ++expected_id;
    }
  }
  producer.join();
  BOOST_TEST(error == "");
  BOOST_TEST(!abort.load());
  BOOST_TEST(expected_id == frame_count);
  BOOST_TEST(consumed_bytes == produced_bytes);
  BOOST_TEST(consumed_sum == produced_sum);
  // Sanity: about 256 + 65 bytes per frame on average: the payloads were real.
  BOOST_TEST(produced_bytes > 250'000'000ull);
  BOOST_TEST_MESSAGE("moved " << produced_bytes << " payload bytes in " << frame_count
                              << " frames");
}

BOOST_AUTO_TEST_SUITE_END()
