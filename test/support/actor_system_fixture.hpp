#pragma once

/// @file actor_system_fixture.hpp
/// A real actor system (threaded scheduler) with castellan's types
/// registered, and helpers to wait for replies with a timeout so that no test
/// can hang.

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>

#include "actors/interfaces.hpp"
#include "build_paths.hpp"

namespace castellan::test {

struct actor_system_fixture {
  static caf::actor_system_config& init(caf::actor_system_config& c) {
    prepare_actor_system_config(c);
    return c;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;

  actor_system_fixture() : sys(init(cfg)), self(sys) {}

  /// A pool configuration that uses the build tree's worker and harness.
  /// Under CASTELLAN_TEST_WARM_START=1 (the `.warm` CTest entries), its
  /// workers start warm from the launcher (pool_config::warm_start): the
  /// same suites then check the sandbox as a launched worker gets it.
  static pool_config test_pool(uint32_t size = 1) {
    pool_config pc;
    pc.size = size;
    pc.worker_binary = worker_binary();
    pc.harness = harness();
    pc.warm_start = warm_start_requested();
    return pc;
  }

  static bool warm_start_requested() {
    const char* v = std::getenv("CASTELLAN_TEST_WARM_START");
    return v != nullptr && std::string(v) == "1";
  }

  /// Sends `req` to `dest` and waits for the result (fails the test on an
  /// error or after `timeout`).
  template <class Handle>
  exec_result exec(const Handle& dest, exec_request req,
                   std::chrono::seconds timeout = std::chrono::seconds(30)) {
    exec_result out;
    bool got = false;
    self->request(dest, timeout, exec_atom::value, std::move(req))
      .receive(
        [&](exec_result& r) {
          out = std::move(r);
          got = true;
        },
        [&](caf::error& err) { BOOST_FAIL("exec failed: " << sys.render(err)); });
    BOOST_REQUIRE(got);
    return out;
  }

  template <class Handle>
  exec_result exec_code(const Handle& dest, std::string code) {
    exec_request req;
    req.code = std::move(code);
    return exec(dest, std::move(req));
  }
};

} // namespace castellan::test
