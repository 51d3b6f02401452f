#include <boost/test/unit_test.hpp>

#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "actors/audit/file_sink.hpp"
#include "audit_test_support.hpp"
#include "support/stalled_fifo.hpp"

using namespace castellan;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<file_sink> open_sink(const file_sink_config& cfg) {
  auto s = file_sink::open(cfg);
  BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
  return std::move(*s);
}

std::string numbered(size_t i, size_t pad = 80) {
  return "{\"n\":" + std::to_string(i) + ",\"pad\":\"" + std::string(pad, 'p') + "\"}";
}

// The `n` of every record in `files`, oldest file first.
std::vector<size_t> numbers_in(const std::vector<std::string>& files) {
  std::vector<size_t> out;
  for (const auto& f : files)
    for (const auto& j : test::read_records(f))
      out.push_back(j["n"].get<size_t>());
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(audit_file_sink)

BOOST_AUTO_TEST_CASE(writes_every_line_in_order) {
  test::temp_dir dir;
  file_sink_config cfg;
  cfg.path = dir.file("audit.jsonl");
  {
    auto sink = open_sink(cfg);
    for (size_t i = 0; i < 5000; ++i)
      BOOST_REQUIRE((sink->push(numbered(i)) == file_sink::push_status::queued));
  } // the destructor drains the queue
  auto ns = numbers_in({cfg.path});
  BOOST_REQUIRE_EQUAL(ns.size(), 5000u);
  for (size_t i = 0; i < ns.size(); ++i)
    BOOST_REQUIRE_EQUAL(ns[i], i);
}

BOOST_AUTO_TEST_CASE(appends_to_an_existing_log) {
  test::temp_dir dir;
  file_sink_config cfg;
  cfg.path = dir.file("audit.jsonl");
  open_sink(cfg)->push(numbered(0));
  open_sink(cfg)->push(numbered(1));
  BOOST_TEST((numbers_in({cfg.path}) == std::vector<size_t>{0, 1}));
}

BOOST_AUTO_TEST_CASE(rotation_keeps_every_record_once) {
  test::temp_dir dir;
  file_sink_config cfg;
  cfg.path = dir.file("audit.jsonl");
  cfg.max_bytes = 4096;
  cfg.max_files = 50;
  const size_t n = 1000; // ~100 bytes each: about 25 files
  file_sink_stats st;
  {
    auto sink = open_sink(cfg);
    for (size_t i = 0; i < n; ++i)
      sink->push(numbered(i));
    BOOST_REQUIRE(sink->flush(10s));
    st = sink->stats();
  }
  BOOST_TEST(st.rotations >= 20u);
  BOOST_TEST(st.written == n);
  std::vector<std::string> files;
  for (uint32_t i = cfg.max_files; i >= 1; --i) {
    const auto f = cfg.path + "." + std::to_string(i);
    if (std::filesystem::exists(f))
      files.push_back(f);
  }
  files.push_back(cfg.path);
  BOOST_TEST(files.size() == st.rotations + 1);
  for (const auto& f : files)
    BOOST_TEST(std::filesystem::file_size(f) <= cfg.max_bytes, f);
  auto ns = numbers_in(files);
  BOOST_REQUIRE_EQUAL(ns.size(), n);
  for (size_t i = 0; i < n; ++i)
    BOOST_REQUIRE_EQUAL(ns[i], i);
}

BOOST_AUTO_TEST_CASE(rotation_drops_the_oldest_beyond_max_files) {
  test::temp_dir dir;
  file_sink_config cfg;
  cfg.path = dir.file("audit.jsonl");
  cfg.max_bytes = 2048;
  cfg.max_files = 2;
  {
    auto sink = open_sink(cfg);
    for (size_t i = 0; i < 300; ++i)
      sink->push(numbered(i));
  }
  BOOST_TEST(std::filesystem::exists(cfg.path + ".1"));
  BOOST_TEST(std::filesystem::exists(cfg.path + ".2"));
  BOOST_TEST(!std::filesystem::exists(cfg.path + ".3"));
  // What is kept is the newest records, contiguous, ending with the last.
  auto ns = numbers_in({cfg.path + ".2", cfg.path + ".1", cfg.path});
  BOOST_REQUIRE(!ns.empty());
  BOOST_TEST(ns.back() == 299u);
  for (size_t i = 1; i < ns.size(); ++i)
    BOOST_REQUIRE_EQUAL(ns[i], ns[i - 1] + 1);
}

BOOST_AUTO_TEST_CASE(every_fsync_policy_is_accepted) {
  test::temp_dir dir;
  for (auto policy : {fsync_policy::never, fsync_policy::interval, fsync_policy::every_record}) {
    file_sink_config cfg;
    cfg.path = dir.file("audit-" + to_string(policy) + ".jsonl");
    cfg.fsync = policy;
    cfg.fsync_interval_ms = 20;
    auto sink = open_sink(cfg);
    for (size_t i = 0; i < 100; ++i)
      sink->push(numbered(i));
    BOOST_REQUIRE(sink->flush(10s));
    const auto st = sink->stats();
    BOOST_TEST(st.written == 100u);
    BOOST_TEST(st.write_errors == 0u, st.last_error);
    switch (policy) {
    case fsync_policy::never:
      BOOST_TEST(st.fsyncs == 0u);
      break;
    case fsync_policy::interval:
      BOOST_TEST(st.fsyncs >= 1u);
      break;
    case fsync_policy::every_record:
      BOOST_TEST(st.fsyncs == st.writes); // no write is left unsynced
      break;
    }
  }
}

BOOST_AUTO_TEST_CASE(interval_fsync_happens_without_a_flush) {
  test::temp_dir dir;
  file_sink_config cfg;
  cfg.path = dir.file("audit.jsonl");
  cfg.fsync = fsync_policy::interval;
  cfg.fsync_interval_ms = 20;
  auto sink = open_sink(cfg);
  sink->push(numbered(0));
  // The writer thread syncs on its own clock and tells no one: poll its
  // counters, with a 30 s safety net.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (sink->stats().fsyncs == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  BOOST_TEST(sink->stats().fsyncs >= 1u, "no interval fsync within 30 s");
}

BOOST_AUTO_TEST_CASE(unopenable_path_is_a_clear_error) {
  file_sink_config cfg;
  cfg.path = "/nonexistent-dir/audit.jsonl";
  auto s = file_sink::open(cfg);
  BOOST_REQUIRE(!s);
  BOOST_TEST(s.error().code == ENOENT);
  BOOST_TEST(s.error().describe().find("/nonexistent-dir/audit.jsonl") != std::string::npos);
  cfg.path.clear();
  BOOST_TEST(!file_sink::open(cfg));
}

BOOST_AUTO_TEST_CASE(a_stalled_reader_means_backpressure_then_counted_drops) {
  // A FIFO nobody reads is a disk that stalls: the writer blocks in write(2),
  // the queue fills to its bound, pushes block and then fail, counted.
  test::temp_dir dir;
  // Declared before the FIFO, destroyed after it: should a check below abort
  // the test, the read end closes first, so that the sink's writer fails
  // (EPIPE) instead of blocking its destructor.
  std::unique_ptr<file_sink> sink;
  test::stalled_fifo fifo(dir.file("audit.fifo"));
  file_sink_config cfg;
  cfg.path = fifo.path();
  cfg.fsync = fsync_policy::never;
  cfg.queue_records = 4;
  cfg.block_timeout_ms = 100;
  auto opened = file_sink::open(cfg);
  BOOST_REQUIRE(opened);
  sink = std::move(*opened);
  const std::string big(32 * 1024, 'x'); // two fill the pipe
  uint64_t timed_out = 0;
  for (int i = 0; i < 50 && timed_out == 0; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (sink->push("\"" + big + "\"") == file_sink::push_status::timed_out) {
      ++timed_out;
      BOOST_TEST((std::chrono::steady_clock::now() - t0 >= 90ms)); // it did block first
    }
  }
  BOOST_REQUIRE_EQUAL(timed_out, 1u);
  BOOST_TEST(sink->congested());
  BOOST_TEST(sink->stats().queue_high_water <= 4u);
  BOOST_TEST(sink->stats().dropped == 1u);

  // The reader comes back: everything accepted arrives, nothing else is lost.
  fifo.drain();
  for (int i = 0; i < 10; ++i) {
    // Push once the writer has made room (30 s safety net): a push into a
    // full queue waits only 100 ms, which a starved machine can outlast.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (sink->queued() >= cfg.queue_records &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    BOOST_TEST((sink->push("\"" + big + "\"") == file_sink::push_status::queued));
  }
  const auto pushed = sink->stats().pushed;
  const auto high_water = sink->stats().queue_high_water;
  sink.reset(); // drains, closes: the reader sees EOF
  BOOST_TEST(fifo.lines_at_end() == pushed);
  BOOST_TEST(high_water <= 4u);
}

BOOST_AUTO_TEST_CASE(congestion_counts_bytes_as_well_as_records) {
  // Few large records fill the byte bound long before the record bound: the
  // sink says it is congested by then, so credits stop before pushes block.
  test::temp_dir dir;
  std::unique_ptr<file_sink> sink; // destroyed after the FIFO (see above)
  test::stalled_fifo fifo(dir.file("audit.fifo"), 4096);
  file_sink_config cfg;
  cfg.path = fifo.path();
  cfg.fsync = fsync_policy::never;
  cfg.queue_records = 1000;
  cfg.queue_bytes = 64 * 1024;
  cfg.block_timeout_ms = 100;
  auto opened = file_sink::open(cfg);
  BOOST_REQUIRE(opened);
  sink = std::move(*opened);
  const std::string kib(1024, 'x');
  int pushed = 0;
  while (!sink->congested() && pushed < 200) {
    BOOST_REQUIRE((sink->push("\"" + kib + "\"") == file_sink::push_status::queued));
    ++pushed;
  }
  BOOST_TEST(sink->congested());
  // By bytes (three quarters of 64 KiB in 1 KiB records), far below 750 records.
  BOOST_TEST(sink->queued() < 100u);
  fifo.drain();
  sink.reset();
  BOOST_TEST(fifo.lines_at_end() == static_cast<uint64_t>(pushed));
}

BOOST_AUTO_TEST_CASE(attached_fd_gets_lines_without_rotation) {
  int fds[2];
  BOOST_REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  file_sink_config cfg;
  cfg.max_bytes = 10; // ignored for an attached fd
  {
    auto sink = file_sink::attach(fds[1], cfg);
    sink->push("{\"a\":1}");
    sink->push("{\"b\":2}");
    BOOST_REQUIRE(sink->flush(5s));
    BOOST_TEST(sink->stats().rotations == 0u);
    BOOST_TEST(sink->stats().fsyncs == 0u);
  }
  ::close(fds[1]);
  char buf[64] = {};
  const auto n = ::read(fds[0], buf, sizeof(buf) - 1);
  ::close(fds[0]);
  BOOST_TEST(std::string(buf, static_cast<size_t>(n)) == "{\"a\":1}\n{\"b\":2}\n");
}

BOOST_AUTO_TEST_SUITE_END()
