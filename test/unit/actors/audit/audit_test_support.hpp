#pragma once

/// @file audit_test_support.hpp
/// Reading JSON-lines files back, and one sample event
/// of each kind for the audit tests.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "actors/audit/audit_messages.hpp"
#include "support/temp_dir.hpp"

namespace castellan::test {

inline std::vector<std::string> read_lines(const std::string& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

/// Every line parsed; fails the test on a line that is not JSON.
inline std::vector<nlohmann::json> read_records(const std::string& file) {
  std::vector<nlohmann::json> out;
  for (const auto& line : read_lines(file)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    BOOST_REQUIRE_MESSAGE(!j.is_discarded(), "not JSON: " << line);
    out.push_back(std::move(j));
  }
  return out;
}

inline exec_started sample_started() {
  exec_started x;
  x.exec_id = 42;
  x.pool = "default";
  x.worker_id = 3;
  x.policy = "strict";
  x.code_sha256 = std::string(64, 'a');
  x.code_size = 17;
  x.timestamp_ns = 1'763'769'241'123'456'789;
  x.policy_revision = 4;
  return x;
}

inline exec_finished sample_finished(error_class cls) {
  exec_finished x;
  x.exec_id = 42;
  x.pool = "default";
  x.worker_id = 3;
  x.policy = "strict";
  x.error = cls;
  x.exit_code = cls == error_class::timeout ? 124 : 0;
  x.timing = {15, 2500};
  x.usage = {2100, 12 << 20};
  x.detail = "detail text";
  x.timestamp_ns = 1'763'769'241'223'456'789;
  x.policy_revision = 4;
  return x;
}

/// `kind` names an event kind; any other text stands for a kind this build
/// does not know (a value from a newer node).
inline security_event sample_security(const std::string& kind) {
  security_event x;
  x.exec_id = 42;
  x.pool = "default";
  x.worker_id = 3;
  x.policy = "strict";
  if (!from_string(kind, x.event.kind))
    x.event.kind = static_cast<event_kind>(200);
  x.event.syscall = "openat";
  x.event.target = "/etc/shadow";
  x.event.decision = kind == "policy_warning"   ? event_decision::warn
                     : kind == "syscall_denied" ? event_decision::deny
                                                : event_decision::kill;
  x.event.rule = "/fs/rules/0";
  x.event.pid = 77;
  x.event.timestamp_ns = 1'763'769'241'323'456'789;
  return x;
}

inline worker_lost_event sample_lost() {
  return worker_lost_event{"default", 4, 1234, 0, "killed by signal 9", 1'763'769'241'423'456'789};
}

inline policy_rejection sample_rejection() {
  return policy_rejection{
      "broken",
      "/etc/castellan/broken.json",
      {"/fs/rules/0/path: must be absolute", "/net/rules/1/port: 70000 > 65535"},
      1'763'769'241'523'456'789};
}

inline connection_record sample_connection() {
  connection_record x;
  x.exec_id = 42;
  x.pool = "default";
  x.worker_id = 3;
  x.host = "pypi.org";
  x.address = "151.101.0.223";
  x.port = 443;
  x.decision = "allow";
  x.rule = "/net/rules/2";
  x.bytes_out = 512;
  x.bytes_in = 40960;
  x.duration_us = 120000;
  x.timestamp_ns = 1'763'769'241'623'456'789;
  return x;
}

} // namespace castellan::test
