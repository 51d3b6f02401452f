// The capabilities of the thread that acts for a worker
// (actors/mediation/mediation_privileges.hpp): none while it acts, what one step
// needs while that step runs, this thread only.

#include <boost/test/unit_test.hpp>

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

#include "actors/mediation/mediation_privileges.hpp"
#include "platform/linux/thread_capabilities.hpp"

using namespace castellan;

namespace {

/// CapEff of thread `tid` of this process, as /proc shows it.
uint64_t effective_of(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("CapEff:", 0) == 0)
      return std::stoull(line.substr(7), nullptr, 16);
  BOOST_FAIL("no CapEff for thread " << tid);
  return 0;
}

uint64_t permitted_now() {
  platform::thread_capability_sets s;
  BOOST_REQUIRE(platform::get_thread_capabilities(s) == 0);
  return s.permitted;
}

} // namespace

BOOST_AUTO_TEST_SUITE(mediation_privilege_tests)

BOOST_AUTO_TEST_CASE(the_acting_thread_holds_no_capability_and_raises_one_step_at_a_time) {
  const uint64_t before = mediation::effective_now();
  const uint64_t permitted = permitted_now();
  const auto main_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  uint64_t inside = ~uint64_t{0};
  uint64_t during_step = 0;
  uint64_t after_step = ~uint64_t{0};
  uint64_t other_thread = 0;
  uint64_t after = 0;
  std::thread acting([&] {
    const uint64_t mine = mediation::effective_now();
    {
      mediation::without_capabilities scope;
      BOOST_REQUIRE(static_cast<bool>(scope));
      inside = mediation::effective_now();
      // The other threads of the process keep their own sets.
      other_thread = effective_of(main_tid);
      {
        mediation::raised_capabilities step(mediation::ptrace_cap() | mediation::kill_cap());
        during_step = mediation::effective_now();
      }
      after_step = mediation::effective_now();
    }
    after = mediation::effective_now();
    BOOST_TEST(after == mine);
  });
  acting.join();
  BOOST_TEST(inside == 0u);
  BOOST_TEST(during_step == ((mediation::ptrace_cap() | mediation::kill_cap()) & permitted));
  BOOST_TEST(after_step == 0u);
  BOOST_TEST(other_thread == before);
  BOOST_TEST(mediation::effective_now() == before);
}

BOOST_AUTO_TEST_CASE(a_step_outside_a_scope_changes_nothing) {
  const uint64_t before = mediation::effective_now();
  {
    mediation::raised_capabilities step(mediation::setns_cap());
    BOOST_TEST(mediation::effective_now() == before);
  }
  BOOST_TEST(mediation::effective_now() == before);
}

BOOST_AUTO_TEST_SUITE_END()
