// drop_capabilities against the real kernel, in a forked child that owns a
// fresh user namespace (so it starts with every capability there).

#include <boost/test/unit_test.hpp>

#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>

#include <linux/capability.h>
#include <linux/securebits.h>

#include "child_process.hpp"
#include "platform/linux/capabilities.hpp"
#include "platform/linux/file_io.hpp"
#include "sandbox_helpers.hpp"

using namespace castellan;
using namespace castellan::platform;

BOOST_AUTO_TEST_SUITE(capabilities_tests)

BOOST_AUTO_TEST_CASE(everything_is_dropped_and_locked) {
  auto body = []() -> std::string {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWUTS) != 0)
      return "unshare(CLONE_NEWUSER): " + castellan::test::err_text(errno);
    auto before = current_capabilities();
    if (!before || before->effective == 0 || before->bounding == 0)
      return "expected capabilities in a fresh user namespace";
    // Raise one ambient capability so that clearing ambient is observable.
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0) == 0)
      return "ambient raise without inheritable should fail";
    auto report = drop_capabilities();
    if (!report)
      return "drop_capabilities: " + report.error().describe();
    std::string err;
    auto status = read_text_file("/proc/self/status");
    if (!status)
      return "read /proc/self/status failed";
    for (const char* key : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
      const auto pos = status->find(std::string("\n") + key + ":\t");
      if (pos == std::string::npos ||
          status->compare(pos + 1 + std::strlen(key) + 2, 16, "0000000000000000") != 0)
        err += std::string(key) + " is not zero\n";
    }
    const unsigned want = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                          SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                          SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if ((report->securebits & want) != want)
      err += "securebits not locked: " + std::to_string(report->securebits) + "\n";
    // A capability-gated call now fails (we own the UTS namespace).
    err += castellan::test::expect_errno("sethostname", ::sethostname("x", 1), EPERM);
    // Securebits cannot be unlocked.
    err += castellan::test::expect_errno("PR_SET_SECUREBITS 0",
                                         ::prctl(PR_SET_SECUREBITS, 0, 0, 0, 0), EPERM);
    // Idempotent: a second call succeeds without any capability.
    if (auto again = drop_capabilities(); !again)
      err += "second drop_capabilities: " + again.error().describe() + "\n";
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
}

BOOST_AUTO_TEST_CASE(names) {
  BOOST_TEST(capability_names(0) == "none");
  BOOST_TEST(capability_names(setup_capability_mask()) ==
             "CAP_DAC_OVERRIDE,CAP_SETPCAP,CAP_NET_ADMIN,CAP_SYS_ADMIN");
}

BOOST_AUTO_TEST_SUITE_END()
