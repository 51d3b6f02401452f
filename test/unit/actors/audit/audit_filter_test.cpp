#include <boost/test/unit_test.hpp>

#include "actors/audit/audit_kind.hpp"

using namespace castellan;

BOOST_AUTO_TEST_SUITE(audit_filter)

BOOST_AUTO_TEST_CASE(kind_names_round_trip) {
  for (auto k : all_audit_kinds) {
    audit_kind back = audit_kind::exec_start;
    BOOST_REQUIRE(from_string(kind_name(k), back));
    BOOST_TEST((back == k));
  }
  audit_kind out;
  BOOST_TEST(!from_string("exec_begin", out));
}

BOOST_AUTO_TEST_CASE(always_on_kinds_are_recorded_even_when_disabled) {
  const std::set<std::string> none;
  for (auto k : {audit_kind::syscall_denied, audit_kind::optimistic_violation,
                 audit_kind::policy_event, audit_kind::policy_rejected, audit_kind::timeout,
                 audit_kind::oom, audit_kind::worker_lost, audit_kind::drop_report,
                 audit_kind::session}) {
    BOOST_TEST(always_recorded(k), kind_name(k));
    BOOST_TEST(should_record(false, none, k), kind_name(k));
  }
}

BOOST_AUTO_TEST_CASE(optional_kinds_need_enabled_and_selected) {
  const std::set<std::string> events{"exec_start", "connection"};
  for (auto k : {audit_kind::exec_start, audit_kind::exec_end, audit_kind::policy_warning,
                 audit_kind::connection}) {
    BOOST_TEST(!always_recorded(k), kind_name(k));
    // audit.enabled = false: nothing optional, whatever events says.
    BOOST_TEST(!should_record(false, events, k), kind_name(k));
  }
  BOOST_TEST(should_record(true, events, audit_kind::exec_start));
  BOOST_TEST(should_record(true, events, audit_kind::connection));
  BOOST_TEST(!should_record(true, events, audit_kind::exec_end));
  BOOST_TEST(!should_record(true, events, audit_kind::policy_warning));
  BOOST_TEST(!should_record(true, {}, audit_kind::exec_start));
}

BOOST_AUTO_TEST_CASE(wildcards_select_everything) {
  for (const char* w : {"*", "all"})
    for (auto k : all_audit_kinds)
      BOOST_TEST(should_record(true, {w}, k), w << " " << kind_name(k));
}

BOOST_AUTO_TEST_CASE(syscall_names_select_events_about_that_syscall) {
  // The policy reference's audit.events lists syscalls ("connect", "openat").
  const std::set<std::string> events{"openat", "connect"};
  BOOST_TEST(should_record(true, events, audit_kind::policy_warning, "openat"));
  BOOST_TEST(!should_record(true, events, audit_kind::policy_warning, "execve"));
  BOOST_TEST(should_record(true, events, audit_kind::connection, "connect"));
  BOOST_TEST(!should_record(true, events, audit_kind::exec_start, ""));
  BOOST_TEST(!should_record(false, events, audit_kind::policy_warning, "openat"));
}

BOOST_AUTO_TEST_CASE(unknown_security_kinds_are_never_filtered) {
  BOOST_TEST((security_kind(event_kind::syscall_denied) == audit_kind::syscall_denied));
  BOOST_TEST((security_kind(event_kind::policy_warning) == audit_kind::policy_warning));
  BOOST_TEST((security_kind(event_kind::optimistic_violation) == audit_kind::optimistic_violation));
  // A kind from a newer node.
  const auto newer = static_cast<event_kind>(200);
  BOOST_TEST((security_kind(newer) == audit_kind::policy_event));
  BOOST_TEST(should_record(false, {}, security_kind(newer)));
}

BOOST_AUTO_TEST_SUITE_END()
