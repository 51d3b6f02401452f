// The decisions made from the tokens file: who a request is, which pools a
// token may use, how many execs it may have in flight.

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "actors/api/access_control.hpp"

using namespace castellan::api;

namespace {

token_entry entry(std::string name, const std::string& secret,
                  std::optional<std::vector<std::string>> pools = std::nullopt,
                  uint32_t max_concurrent = 0) {
  token_entry e;
  e.name = std::move(name);
  e.sha256 = digest_of(secret);
  e.pools = std::move(pools);
  e.max_concurrent = max_concurrent;
  return e;
}

access_control two_tokens() {
  return access_control(
      {entry("ci", "cst_ci", std::vector<std::string>{"default"}, 2), entry("ops", "cst_ops")});
}

} // namespace

BOOST_AUTO_TEST_SUITE(api_access_control)

BOOST_AUTO_TEST_CASE(who_a_request_is) {
  auto ac = two_tokens();
  auto ci = ac.identify("Bearer cst_ci", true);
  BOOST_TEST((ci.type == caller::kind::token));
  BOOST_TEST(ci.name == "ci");
  BOOST_REQUIRE(ac.entry(ci) != nullptr);
  BOOST_TEST(ac.entry(ci)->max_concurrent == 2u);
  auto ops = ac.identify("Bearer cst_ops", false);
  BOOST_TEST((ops.type == caller::kind::token));
  BOOST_TEST(ops.name == "ops");
  BOOST_TEST(ac.entry(caller{}) == nullptr);
  // Where a token is needed: none is missing, a wrong one invalid.
  BOOST_TEST((ac.identify("", true).type == caller::kind::missing));
  BOOST_TEST((ac.identify("Bearer cst_nope", true).type == caller::kind::invalid));
  BOOST_TEST((ac.identify("Basic Y2k6Y2k=", true).type == caller::kind::invalid));
  // The digest, not a prefix of the token, is what matches.
  BOOST_TEST((ac.identify("Bearer cst_c", true).type == caller::kind::invalid));
  BOOST_TEST((ac.identify("Bearer cst_cii", true).type == caller::kind::invalid));
  // Where none is needed (a unix socket): none is anonymous, and one that
  // is sent must still be valid.
  BOOST_TEST((ac.identify("", false).type == caller::kind::anonymous));
  BOOST_TEST((ac.identify("Bearer cst_nope", false).type == caller::kind::invalid));
  BOOST_TEST(!ac.identify("Bearer cst_nope", false).allowed());
  BOOST_TEST(ac.identify("", false).allowed());
}

BOOST_AUTO_TEST_CASE(without_a_tokens_file_a_sent_token_is_invalid) {
  access_control none;
  BOOST_TEST(!none.has_tokens_file());
  BOOST_TEST((none.identify("", false).type == caller::kind::anonymous));
  BOOST_TEST((none.identify("Bearer cst_ci", false).type == caller::kind::invalid));
  access_control empty(std::vector<token_entry>{});
  BOOST_TEST(empty.has_tokens_file());
  BOOST_TEST((empty.identify("", true).type == caller::kind::missing));
}

BOOST_AUTO_TEST_CASE(the_pool_allowlist_and_the_concurrency_limit) {
  auto ac = two_tokens();
  auto ci = ac.identify("Bearer cst_ci", true);
  auto ops = ac.identify("Bearer cst_ops", true);
  BOOST_TEST((ac.admit(ci, "gpu") == admission::pool_not_allowed));
  BOOST_TEST(ac.in_flight(ci) == 0u, "a refusal counts nothing");
  BOOST_TEST((ac.admit(ci, "default") == admission::admitted));
  BOOST_TEST((ac.admit(ci, "default") == admission::admitted));
  BOOST_TEST((ac.admit(ci, "default") == admission::too_many_execs));
  BOOST_TEST(ac.in_flight(ci) == 2u);
  // The allowlist comes first: a pool outside it is 403 even at the limit.
  BOOST_TEST((ac.admit(ci, "gpu") == admission::pool_not_allowed));
  // Another token's count is its own; no allowlist is every pool.
  BOOST_TEST((ac.admit(ops, "gpu") == admission::admitted));
  BOOST_TEST((ac.admit(ops, "policy-1234") == admission::admitted));
  ac.release(ci);
  BOOST_TEST(ac.in_flight(ci) == 1u);
  BOOST_TEST((ac.admit(ci, "default") == admission::admitted));
  ac.release(ci);
  ac.release(ci);
  ac.release(ci); // one more than counted: stays at 0
  BOOST_TEST(ac.in_flight(ci) == 0u);
  // Anonymous callers (the unix socket) have neither.
  caller anon;
  BOOST_TEST((ac.admit(anon, "gpu") == admission::admitted));
  BOOST_TEST(ac.in_flight(anon) == 0u);
}

BOOST_AUTO_TEST_CASE(may_use_is_the_allowlist_without_counting) {
  auto ac = two_tokens();
  auto ci = ac.identify("Bearer cst_ci", true);
  BOOST_TEST(ac.may_use(ci, "default"));
  BOOST_TEST(!ac.may_use(ci, "gpu"));
  BOOST_TEST(ac.in_flight(ci) == 0u);
  BOOST_TEST(ac.may_use(ac.identify("Bearer cst_ops", true), "gpu"));
  BOOST_TEST(ac.may_use(caller{}, "gpu"));
}

BOOST_AUTO_TEST_CASE(an_empty_allowlist_allows_no_pool) {
  access_control ac({entry("watcher", "cst_w", std::vector<std::string>{})});
  auto w = ac.identify("Bearer cst_w", true);
  BOOST_TEST((ac.admit(w, "default") == admission::pool_not_allowed));
}

BOOST_AUTO_TEST_CASE(a_reload_keeps_the_counts_of_the_tokens_that_stay) {
  auto ac = two_tokens();
  auto ci = ac.identify("Bearer cst_ci", true);
  auto ops = ac.identify("Bearer cst_ops", true);
  BOOST_TEST((ac.admit(ci, "default") == admission::admitted));
  BOOST_TEST((ac.admit(ops, "default") == admission::admitted));
  // The new file: ci moves to the end with a limit of 1 and a new name,
  // ops is gone, ci's old allowlist widens, a new token arrives.
  ac.replace({entry("new", "cst_new"),
              entry("ci-renamed", "cst_ci", std::vector<std::string>{"default", "gpu"}, 1)});
  // ci is still the same token: its exec in flight counts against the new
  // limit, and the caller identified before the reload finds its new entry.
  BOOST_TEST(ac.in_flight(ci) == 1u);
  BOOST_TEST((ac.admit(ci, "gpu") == admission::too_many_execs));
  BOOST_REQUIRE(ac.entry(ci) != nullptr);
  BOOST_TEST(ac.entry(ci)->name == "ci-renamed");
  auto ci_now = ac.identify("Bearer cst_ci", true);
  BOOST_TEST(ci_now.name == "ci-renamed");
  BOOST_TEST(ac.in_flight(ci_now) == 1u);
  ac.release(ci);
  BOOST_TEST((ac.admit(ci_now, "gpu") == admission::admitted));
  // ops left: it is invalid from now on and admits nothing, even when
  // identified before the reload; its exec in flight still releases.
  BOOST_TEST((ac.identify("Bearer cst_ops", true).type == caller::kind::invalid));
  BOOST_TEST(ac.entry(ops) == nullptr);
  BOOST_TEST(!ac.may_use(ops, "default"));
  BOOST_TEST((ac.admit(ops, "default") == admission::pool_not_allowed));
  BOOST_TEST(ac.in_flight(ops) == 1u);
  ac.release(ops);
  BOOST_TEST(ac.in_flight(ops) == 0u);
  // The new token works at once.
  BOOST_TEST((ac.identify("Bearer cst_new", true).type == caller::kind::token));
  // A server started without a tokens file that is given one has one.
  access_control none;
  none.replace({});
  BOOST_TEST(none.has_tokens_file());
  BOOST_TEST((none.identify("", true).type == caller::kind::missing));
}

BOOST_AUTO_TEST_SUITE_END()
