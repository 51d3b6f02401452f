// Real packages under the default policy: a data-analysis exec (numpy,
// pandas, a matplotlib PNG, a multiprocessing pool, sqlite3, a Python
// subprocess) through the CLI, in every mode: shared and isolated, exec'd and
// warm-started workers. Nothing in the environment is set for it: what the
// sandbox gives (HOME, /etc as the installed packages need it) is enough.

#include <boost/test/unit_test.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/run_process.hpp"
#include "support/sanitizers.hpp"

using castellan::test::castellan_cli;
using castellan::test::run_process;
using castellan::test::source_dir;

namespace {

/// The policy: default.json, except in an AddressSanitizer build for
/// warm-started workers. Those run Python inside the instrumented launcher,
/// so every allocation of the interpreter goes through ASan's allocator,
/// whose quarantine alone keeps up to 256 MiB of freed memory: the same
/// limit as default.json's. There the memory limit is raised (and said so).
std::string analysis_policy(bool warm) {
  const std::string prebuilt = source_dir() + "/policies/default.json";
  if (!warm || !castellan::test::address_sanitizer)
    return prebuilt;
  BOOST_TEST_MESSAGE("AddressSanitizer build: warm workers get a 2 GiB memory limit");
  // A copy, not an extension: merged limits take the lower one.
  std::ifstream in(prebuilt);
  auto doc = nlohmann::json::parse(in);
  doc["limits"]["memory_bytes"] = 2147483648ull;
  const std::string path = "/tmp/castellan-analysis-asan.json";
  std::ofstream(path) << doc.dump();
  return path;
}

void run_analysis(const std::string& mode, bool warm) {
  std::vector<std::string> args{castellan_cli(),
                                "exec",
                                "--json",
                                "--policy",
                                analysis_policy(warm),
                                "--mode",
                                mode,
                                "--timeout",
                                "120s",
                                "-f",
                                source_dir() + "/test/integration/data/analysis.py"};
  if (warm)
    args.push_back("--warm-start");
  const std::string label = mode + (warm ? " warm" : " exec'd");
  auto r = run_process(args);
  BOOST_TEST_MESSAGE(label << ": exit " << r.exit_code);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  BOOST_REQUIRE_MESSAGE(!j.is_discarded(), label << ": not JSON: " << r.out << r.err);
  BOOST_TEST(r.exit_code == 0, label << ": " << j.dump());
  BOOST_TEST(j["error_class"] == "ok", label << ": " << j["stderr"]);
  const std::string out = j["stdout"].get<std::string>();
  auto a = nlohmann::json::parse(out, nullptr, false);
  BOOST_REQUIRE_MESSAGE(!a.is_discarded(), label << ": stdout " << out << " stderr "
                                                 << j["stderr"]);
  BOOST_TEST(a["numpy_sum"] == 66.0, label);
  BOOST_TEST((a["pandas_groupby"] == nlohmann::json{{"a", 4}, {"b", 6}}), label);
  BOOST_TEST(a["png_signature"] == "89504e470d0a1a0a", label);
  BOOST_TEST(a["png_size"].get<int>() > 5000, label << ": " << a["png_size"]);
  BOOST_TEST((a["pool"] == nlohmann::json{0, 1, 4, 9, 16, 25}), label);
  BOOST_TEST(a["sqlite_sum"] == 45, label);
  BOOST_TEST(a["subprocess"] == "42", label);
  BOOST_TEST_MESSAGE(label << ": matplotlib config dir " << a["mplconfigdir"]);
}

} // namespace

BOOST_AUTO_TEST_SUITE(data_analysis)

BOOST_AUTO_TEST_CASE(shared_mode_execd_workers) { run_analysis("shared", false); }
BOOST_AUTO_TEST_CASE(shared_mode_warm_started_workers) { run_analysis("shared", true); }
BOOST_AUTO_TEST_CASE(isolated_mode_execd_workers) { run_analysis("isolated", false); }
BOOST_AUTO_TEST_CASE(isolated_mode_warm_started_workers) { run_analysis("isolated", true); }

BOOST_AUTO_TEST_SUITE_END()
