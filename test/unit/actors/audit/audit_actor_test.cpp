#include <boost/test/unit_test.hpp>

#include <fstream>
#include <thread>
#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <caf/all.hpp>

#include "actors/actor_system_setup.hpp"
#include "actors/audit/audit_actor.hpp"
#include "actors/telemetry/telemetry_actor.hpp"
#include "audit_test_support.hpp"
#include "support/sanitizers.hpp"
#include "support/stalled_fifo.hpp"

using namespace castellan;
using namespace std::chrono_literals;

namespace {

struct audit_fixture {
  static caf::actor_system_config& init(caf::actor_system_config& c) {
    prepare_actor_system_config(c);
    return c;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  test::temp_dir dir;
  std::vector<caf::actor> spawned;

  audit_fixture() : sys(init(cfg)), self(sys) {}

  ~audit_fixture() {
    // Actors with pending timers or requests would keep the system waiting.
    for (auto& a : spawned)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  audit_config file_config(const std::string& name) {
    audit_config c;
    c.file.path = dir.file(name);
    c.file.fsync = fsync_policy::never;
    return c;
  }

  audit_actor spawn(const audit_config& c, audit_links links = {}) {
    auto a = spawn_audit(sys, c, std::move(links));
    if (!a)
      BOOST_FAIL("spawn_audit: " << sys.render(a.error()));
    spawned.push_back(caf::actor_cast<caf::actor>(*a));
    return *a;
  }

  template <class Handle> void track(const Handle& h) {
    spawned.push_back(caf::actor_cast<caf::actor>(h));
  }

  // Reconfigures `a` with the same settings but a subscriber window of `n`.
  void next_cfg_window(const audit_actor& a, uint32_t n) {
    audit_config c;
    c.enabled = true;
    c.events = {"*"};
    c.subscriber_window = n;
    self->request(a, 10s, c).receive([](audit_stats&) {},
                                     [&](caf::error& err) { BOOST_FAIL(sys.render(err)); });
  }

  audit_stats flush(const audit_actor& a) {
    audit_stats out;
    bool got = false;
    self->request(a, 60s, audit_flush_atom::value)
        .receive(
            [&](audit_stats& s) {
              out = std::move(s);
              got = true;
            },
            [&](caf::error& err) { BOOST_FAIL("flush failed: " << sys.render(err)); });
    BOOST_REQUIRE(got);
    return out;
  }

  // One event of every kind, in a fixed order.
  void send_one_of_each(const audit_actor& a) {
    self->send(a, test::sample_started());
    self->send(a, test::sample_finished(error_class::ok));
    self->send(a, test::sample_finished(error_class::timeout));
    self->send(a, test::sample_finished(error_class::oom));
    self->send(a, test::sample_finished(error_class::worker_lost));
    self->send(a, test::sample_security("syscall_denied"));
    self->send(a, test::sample_security("policy_warning"));
    self->send(a, test::sample_security("optimistic_violation"));
    self->send(a, test::sample_security("novel_kind"));
    self->send(a, test::sample_lost());
    self->send(a, test::sample_rejection());
    self->send(a, test::sample_connection());
  }
};

std::vector<std::string> kinds_of(const std::vector<nlohmann::json>& recs) {
  std::vector<std::string> out;
  for (const auto& r : recs)
    out.push_back(r["kind"].get<std::string>());
  return out;
}

uint64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

} // namespace

BOOST_AUTO_TEST_SUITE(audit_actor_tests)

BOOST_FIXTURE_TEST_CASE(each_event_kind_reaches_the_file_with_its_fields, audit_fixture) {
  auto c = file_config("audit.jsonl");
  c.enabled = true;
  c.events = {"*"};
  auto a = spawn(c);
  send_one_of_each(a);
  const auto st = flush(a);
  BOOST_TEST(st.received == 12u);
  BOOST_TEST(st.recorded == 12u);
  BOOST_TEST(st.file_written == 12u);
  const auto recs = test::read_records(c.file.path);
  const std::vector<std::string> expected{
      "exec_start",   "exec_end",       "timeout",         "oom",
      "worker_lost",  "syscall_denied", "policy_warning",  "optimistic_violation",
      "policy_event", "worker_lost",    "policy_rejected", "connection"};
  BOOST_TEST(kinds_of(recs) == expected, boost::test_tools::per_element());
  for (size_t i = 0; i < recs.size(); ++i) {
    BOOST_TEST(recs[i]["v"] == 1);
    BOOST_TEST(recs[i]["seq"] == i + 1); // consecutive: a gap would be a loss
  }
  BOOST_TEST(recs[0]["code_sha256"] == std::string(64, 'a'));
  BOOST_TEST(recs[0]["ts"] == "2025-11-21T23:54:01.123456789Z");
  BOOST_TEST(recs[2]["exit_code"] == 124);
  BOOST_TEST(recs[3]["error"] == "oom");
  BOOST_TEST(recs[5]["target"] == "/etc/shadow");
  BOOST_TEST(recs[5]["decision"] == "deny");
  BOOST_TEST(recs[7]["decision"] == "kill");
  BOOST_TEST(recs[8]["event_kind"] == "200"); // a kind from a newer node: its number
  BOOST_TEST(recs[9]["reason"] == "killed by signal 9");
  BOOST_TEST(recs[10]["errors"].size() == 2u);
  BOOST_TEST(recs[11]["port"] == 443);
}

BOOST_FIXTURE_TEST_CASE(without_audit_enabled_only_always_on_kinds_are_recorded, audit_fixture) {
  auto c = file_config("audit.jsonl");
  c.enabled = false;
  c.events = {"*"}; // ignored while audit.enabled is false
  auto a = spawn(c);
  send_one_of_each(a);
  const auto st = flush(a);
  BOOST_TEST(st.received == 12u);
  BOOST_TEST(st.filtered == 4u); // exec_start, exec_end, policy_warning, connection
  const std::vector<std::string> expected{
      "timeout",      "oom",         "worker_lost",    "syscall_denied", "optimistic_violation",
      "policy_event", "worker_lost", "policy_rejected"};
  BOOST_TEST(kinds_of(test::read_records(c.file.path)) == expected,
             boost::test_tools::per_element());
}

BOOST_FIXTURE_TEST_CASE(reconfiguration_selects_kinds_and_moves_the_file, audit_fixture) {
  auto c = file_config("first.jsonl");
  auto a = spawn(c);
  self->send(a, test::sample_started()); // not selected yet
  auto next = file_config("second.jsonl");
  next.enabled = true;
  next.events = {"exec_start"};
  bool ok = false;
  self->request(a, 10s, next)
      .receive([&](audit_stats& s) { ok = s.filtered == 1; },
               [&](caf::error& err) { BOOST_FAIL(sys.render(err)); });
  BOOST_TEST(ok);
  self->send(a, test::sample_started());
  self->send(a, test::sample_finished(error_class::ok)); // exec_end: still not selected
  // A file that cannot be opened is refused and changes nothing.
  auto bad = next;
  bad.file.path = "/nonexistent-dir/audit.jsonl";
  bool refused = false;
  self->request(a, 10s, bad).receive([&](audit_stats&) {}, [&](caf::error&) { refused = true; });
  BOOST_TEST(refused);
  self->send(a, test::sample_started());
  flush(a);
  BOOST_TEST(test::read_lines(c.file.path).empty());
  BOOST_TEST(kinds_of(test::read_records(next.file.path)) ==
             (std::vector<std::string>{"exec_start", "exec_start"}));
}

BOOST_FIXTURE_TEST_CASE(spawn_fails_on_an_unopenable_file, audit_fixture) {
  audit_config c;
  c.file.path = "/nonexistent-dir/audit.jsonl";
  auto a = spawn_audit(sys, c);
  BOOST_REQUIRE(!a);
  BOOST_TEST(sys.render(a.error()).find("/nonexistent-dir/audit.jsonl") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(subscribers_get_the_entries_their_filter_selects, audit_fixture) {
  audit_config c; // no file: subscribers only
  c.enabled = true;
  c.events = {"*"};
  auto a = spawn(c);
  caf::actor me = self;
  // It answers (returning the entry's credit) before it forwards: once the
  // test holds an entry, the answer is already in the audit actor's mailbox,
  // ahead of anything the test sends next. An entry of kind "marker" comes
  // from the test itself, straight to the subscriber (see `settle`).
  auto sub = sys.spawn(
      [](caf::event_based_actor* s, caf::actor to) -> caf::behavior {
        return {[=](const audit_entry& e) {
          s->make_response_promise().deliver(caf::unit);
          caf::anon_send(to, e);
        }};
      },
      me);
  track(sub);
  // Makes sure no further entry is on its way: after a flush the audit actor
  // has sent all it will send for what came before; a marker sent to the
  // subscriber after that reaches the test after any such entry (both go
  // through the subscriber's mailbox, in order). Fails on any entry before
  // the marker.
  auto settle = [&](const char* when) {
    flush(a);
    audit_entry marker;
    marker.kind = "marker";
    self->send(sub, marker);
    for (bool done = false; !done;)
      self->receive(
          [&](const audit_entry& e) {
            done = e.kind == "marker";
            if (!done)
              BOOST_ERROR("unexpected entry " << e.kind << " " << when);
          },
          caf::after(30s) >> [&] { BOOST_FAIL("the marker did not come back " << when); });
  };
  self->send(a, subscribe_atom::value, sub, audit_filter{{"syscall_denied", "oom"}, 42, ""});
  self->send(a, test::sample_security("policy_warning")); // other kind
  self->send(a, test::sample_security("syscall_denied")); // selected
  auto other_exec = test::sample_finished(error_class::oom);
  other_exec.exec_id = 7;
  self->send(a, other_exec);                              // other exec
  self->send(a, test::sample_finished(error_class::oom)); // selected
  std::vector<std::string> got;
  for (int i = 0; i < 2; ++i)
    self->receive([&](const audit_entry& e) { got.push_back(e.kind); },
                  caf::after(30s) >> [&] { BOOST_FAIL("no audit entry within 30 s"); });
  BOOST_TEST(got == (std::vector<std::string>{"syscall_denied", "oom"}));
  settle("after the two selected ones");
  // Answered entries return their credit: with a window of 4, rounds of 4
  // entries never drop one.
  next_cfg_window(a, 4);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4; ++i)
      self->send(a, test::sample_security("syscall_denied"));
    for (int i = 0; i < 4; ++i)
      self->receive([](const audit_entry&) {},
                    caf::after(30s) >> [&] { BOOST_FAIL("entry missing in round " << round); });
  }
  BOOST_TEST(flush(a).subscriber_dropped == 0u);
  self->send(a, unsubscribe_atom::value, sub);
  self->send(a, test::sample_security("syscall_denied"));
  settle("after unsubscribe");
}

BOOST_FIXTURE_TEST_CASE(a_slow_subscriber_gets_counted_reported_drops, audit_fixture) {
  auto c = file_config("audit.jsonl");
  c.subscriber_window = 8;
  c.subscriber_timeout_ms = 30000;
  auto a = spawn(c);
  // Never answers: holds every promise, so its window stays full.
  auto promises = std::make_shared<std::vector<caf::response_promise>>();
  auto sub = sys.spawn(
      [](caf::event_based_actor* s, std::shared_ptr<std::vector<caf::response_promise>> held)
          -> caf::behavior {
        return {[=](const audit_entry&) { held->push_back(s->make_response_promise()); }};
      },
      promises);
  track(sub);
  self->send(a, subscribe_atom::value, sub, audit_filter{});
  for (int i = 0; i < 20; ++i)
    self->send(a, test::sample_security("syscall_denied"));
  const auto st = flush(a);
  BOOST_TEST(st.subscriber_dropped == 12u);
  const auto recs = test::read_records(c.file.path);
  BOOST_REQUIRE_EQUAL(recs.size(), 21u); // nothing lost in the file, plus the report
  const auto& report = recs.back();
  BOOST_TEST(report["kind"] == "drop_report");
  BOOST_TEST(report["sink"] == "subscriber:" + std::to_string(sub.id()));
  BOOST_TEST(report["dropped"] == 12);
  BOOST_TEST(report["dropped_total"] == 12);
  BOOST_TEST(report["seq"] == 21);
}

BOOST_FIXTURE_TEST_CASE(counts_reach_telemetry, audit_fixture) {
  auto tel = spawn_telemetry(sys);
  track(tel);
  auto c = file_config("audit.jsonl");
  auto a = spawn(c, audit_links{tel});
  for (int i = 0; i < 3; ++i)
    self->send(a, test::sample_security("syscall_denied"));
  self->send(a, test::sample_lost());
  flush(a);
  std::string text;
  self->request(tel, 10s, metrics_atom::value)
      .receive([&](std::string& t) { text = std::move(t); },
               [&](caf::error& err) { BOOST_FAIL(sys.render(err)); });
  BOOST_TEST(text.find("castellan_audit_records_total{kind=\"syscall_denied\"} 3\n") !=
                 std::string::npos,
             text);
  BOOST_TEST(text.find("castellan_audit_records_total{kind=\"worker_lost\"} 1\n") !=
             std::string::npos);
}

namespace {

// Takes the credits the audit actor has returned so far; with `wait`, blocks
// until at least one batch arrives (60 s safety net).
void take_credits(caf::scoped_actor& self, audit_credits& credits, bool wait) {
  bool more = true;
  while (more) {
    more = false;
    self->receive(
        [&](audit_credit_atom, uint64_t n) {
          credits.returned(n);
          more = true;
        },
                  caf::after(wait ? std::chrono::milliseconds(60000) : std::chrono::milliseconds(0)) >>
                      [&] {
                        if (wait)
                          BOOST_FAIL("no credit came back within 60 s");
                      });
    wait = false;
  }
}

// Joins `a` as a producer: the window it grants. No request timeout: CAF
// 0.17 leaves a request's timer running after the answer, and when it fires
// while the scoped actor still lives (a flood that outlasts it, as under
// AddressSanitizer) its stale timeout message stays in the mailbox with the
// actor as its sender, so the actor is never freed (LeakSanitizer reports
// it). A join that never answers ends at CTest's timeout instead.
uint64_t join(caf::scoped_actor& self, const audit_actor& a) {
  uint64_t window = 0;
  self->request(a, caf::infinite, audit_join_atom::value)
      .receive([&](uint64_t w) { window = w; },
               [&](caf::error& err) { BOOST_FAIL("join failed: " << to_string(err)); });
  return window;
}

// Sends `n` events, cycling through four kinds; with `credits`, holds back
// while they are spent, as the pool's admission does.
void flood(caf::scoped_actor& self, const audit_actor& a, size_t n, audit_credits* credits,
           uint64_t& max_rss) {
  auto denied = test::sample_security("syscall_denied");
  auto started = test::sample_started();
  auto finished = test::sample_finished(error_class::ok);
  auto conn = test::sample_connection();
  audit_credits ignored;
  auto& c = credits ? *credits : ignored;
  auto post = [&](auto& ev) {
    if (credits)
      post_audit(self, a, c, ev);
    else
      self->send(a, ev);
  };
  for (size_t i = 0; i < n; ++i) {
    while (credits && credits->exhausted())
      take_credits(self, *credits, true);
    switch (i % 4) {
    case 0:
      denied.exec_id = i;
      post(denied);
      break;
    case 1:
      started.exec_id = i;
      post(started);
      break;
    case 2:
      finished.exec_id = i;
      post(finished);
      break;
    default:
      conn.exec_id = i;
      post(conn);
      break;
    }
    if (i % 5000 == 0)
      max_rss = std::max(max_rss, rss_bytes());
  }
}

void check_flood_file(const std::string& path, size_t n) {
  std::ifstream in(path);
  size_t lines = 0;
  uint64_t expected_seq = 1;
  for (std::string line; std::getline(in, line); ++lines) {
    // The seq is the fourth field; parse only it, 100,000 full parses are slow.
    const auto pos = line.find("\"seq\":");
    BOOST_REQUIRE(pos != std::string::npos);
    const auto seq = std::stoull(line.substr(pos + 6));
    BOOST_REQUIRE_EQUAL(seq, expected_seq);
    ++expected_seq;
  }
  BOOST_TEST(lines == n);
}

} // namespace

BOOST_FIXTURE_TEST_CASE(a_flood_of_100000_events_loses_nothing_in_bounded_memory, audit_fixture) {
  constexpr size_t n = 100000;
  auto c = file_config("flood.jsonl");
  c.enabled = true;
  c.events = {"*"};
  c.file.queue_records = 1024;
  c.producer_window = 2048;
  auto a = spawn(c);
  audit_credits credits;
  credits.set_window(join(self, a));
  BOOST_TEST(credits.window() == 2048u);
  const auto rss_before = rss_bytes();
  uint64_t max_rss = rss_before;
  flood(self, a, n, &credits, max_rss);
  const auto st = flush(a);
  take_credits(self, credits, false); // the flush returns every credit before it answers
  max_rss = std::max(max_rss, rss_bytes());
  BOOST_TEST(st.received == n);
  BOOST_TEST(st.recorded == n);
  BOOST_TEST(st.file_written == n);
  BOOST_TEST(st.file_dropped == 0u);
  BOOST_TEST(st.queue_capacity == 1024u);
  BOOST_TEST(st.queue_high_water <= st.queue_capacity);
  // The mailbox: never more than the window unacknowledged, and all of it
  // acknowledged in the end.
  BOOST_TEST(credits.high_water() <= credits.window());
  BOOST_TEST(credits.outstanding() == 0u);
  BOOST_TEST(st.producers == 1u);
  BOOST_TEST(st.credits_withheld == 0u);
  check_flood_file(c.file.path, n);
  BOOST_TEST_MESSAGE("flood: RSS growth " << (max_rss - rss_before) / 1024
                                          << " KiB, writer queue high water " << st.queue_high_water
                                          << ", unacknowledged high water "
                                          << credits.high_water());
  if (test::address_sanitizer)
    BOOST_TEST_MESSAGE("flood: RSS bound not checked under AddressSanitizer (its quarantine "
                       "holds freed memory); the plain build checks it");
  else
    BOOST_TEST(max_rss - rss_before < 16ull << 20);
}

BOOST_FIXTURE_TEST_CASE(a_flood_without_admission_control_still_loses_nothing, audit_fixture) {
  // Producers that do not join only lengthen the actor's mailbox; the
  // writer queue stays within its bound and every record is written.
  constexpr size_t n = 100000;
  auto c = file_config("flood.jsonl");
  c.enabled = true;
  c.events = {"*"};
  c.file.queue_records = 256;
  auto a = spawn(c);
  uint64_t max_rss = 0;
  flood(self, a, n, nullptr, max_rss);
  const auto st = flush(a);
  BOOST_TEST(st.file_written == n);
  BOOST_TEST(st.file_dropped == 0u);
  BOOST_TEST(st.queue_high_water <= 256u);
  check_flood_file(c.file.path, n);
}

BOOST_AUTO_TEST_CASE(a_producers_credits_count_what_is_unacknowledged) {
  audit_credits c;
  BOOST_TEST(c.window() == audit_credits::default_window);
  c.set_window(0); // a window of nothing would stop the producer for good
  BOOST_TEST(c.window() == 1u);
  c.set_window(3);
  c.spent();
  c.spent();
  BOOST_TEST(!c.exhausted());
  c.spent();
  BOOST_TEST(c.exhausted());
  c.returned(1);
  BOOST_TEST(!c.exhausted());
  BOOST_TEST(c.outstanding() == 2u);
  // More than outstanding (a confused or hostile peer) stops at zero.
  c.returned(1000);
  BOOST_TEST(c.outstanding() == 0u);
  BOOST_TEST(c.high_water() == 3u);
}

BOOST_FIXTURE_TEST_CASE(a_congested_writer_withholds_credits_until_it_drains, audit_fixture) {
  // A FIFO nobody reads is a disk that stalls: the writer blocks, its queue
  // fills, and from three quarters full on the actor keeps the producer's
  // credits, so a producer that respects them stops with its window spent.
  test::stalled_fifo fifo(dir.file("audit.fifo"), 4096); // a few records fill its pipe
  audit_config c;
  c.enabled = true;
  c.events = {"*"};
  c.file.path = fifo.path();
  c.file.fsync = fsync_policy::never;
  // Congested at 48 records, the window of 8 stops the producer before the
  // queue is full: pushes never block, so the actor keeps answering.
  c.file.queue_records = 64;
  c.file.block_timeout_ms = 60000;
  c.producer_window = 8;
  auto a = spawn(c);
  audit_credits credits;
  credits.set_window(join(self, a));
  auto ev = test::sample_security("syscall_denied");
  ev.event.target.assign(1024, 'x');
  // Post while credits last, taking back what comes. Without the hold-back
  // this would run to the cap; with it, it stops within a few windows.
  // A status answer comes after every event posted before it is handled,
  // and after any credit sent for them: exhausted after taking those, the
  // producer's window is held by the actor.
  uint64_t posted = 0;
  audit_stats st;
  for (;;) {
    while (!credits.exhausted() && posted < 100000) {
      ev.exec_id = ++posted;
      post_audit(self, a, credits, ev);
      take_credits(self, credits, false);
    }
    // (A push blocked on a full queue would hold the answer beyond the timeout.)
    self->request(a, 30s, status_atom::value)
        .receive([&](audit_stats& s) { st = s; },
                 [&](caf::error& err) { BOOST_FAIL(sys.render(err)); });
    take_credits(self, credits, false);
    if (credits.exhausted() || posted >= 100000)
      break;
  }
  BOOST_REQUIRE(credits.exhausted());
  // At most: a batch the writer holds and the queue (64 each), the window,
  // and what the pipe took.
  BOOST_TEST(posted <= 64u + 64u + 8u + 8u);
  // Everything posted is handled, and the actor holds the producer's credits.
  BOOST_TEST(st.received == posted);
  BOOST_TEST(st.producers == 1u);
  BOOST_TEST(st.credits_withheld >= 1u);
  BOOST_TEST_MESSAGE("congested writer: " << posted << " events posted, "
                                          << st.credits_withheld << " credits withheld");
  // The reader comes back: the queue drains, the credits return, and every
  // record arrives.
  fifo.drain();
  while (credits.exhausted())
    take_credits(self, credits, true);
  const auto done = flush(a);
  take_credits(self, credits, false);
  BOOST_TEST(credits.outstanding() == 0u);
  BOOST_TEST(done.credits_withheld == 0u);
  BOOST_TEST(done.file_written == posted);
  BOOST_TEST(done.file_dropped == 0u);
  // Closing the audit closes the FIFO's write end: the reader sees EOF.
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  self->wait_for(a);
  BOOST_TEST(fifo.lines_at_end() == posted);
}

BOOST_AUTO_TEST_SUITE_END()
