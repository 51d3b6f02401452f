// The pool <-> launcher messages: a worker_spec survives the trip with its
// fds in place, and what does not parse is refused with the field named.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <unistd.h>

#include "platform/linux/launch_request.hpp"

using namespace castellan;
using namespace castellan::platform;

namespace {

worker_spec sample_spec() {
  worker_spec spec;
  spec.executable = "/usr/lib/castellan/castellan-worker";
  spec.argv = {spec.executable, "--segment-fd", "3", "--mode", "fork"};
  spec.env = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HTTP_PROXY=http://127.0.0.1:3128"};
  spec.fds = {{10, 0}, {11, 1}, {12, 2}, {13, 3}};
  spec.isolation = isolation_mode::namespaces;
  spec.namespaces = {true, true, true, false, true, true, false};
  spec.hostname = "castellan";
  spec.limits = {256ull << 20, 32, 100};
  spec.die_with_parent = true;
  spec.ids = {1000, 1001, 65534, id_mapping::automatic};
  spec.cgroup.directories = {"/sys/fs/cgroup/memory/castellan/w1",
                             "/sys/fs/cgroup/pids/castellan/w1"};
  spec.setup_capabilities = false;
  return spec;
}

std::vector<unique_fd> open_fds(std::size_t n) {
  std::vector<unique_fd> out;
  for (std::size_t i = 0; i < n; ++i)
    out.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(launch_request_tests)

BOOST_AUTO_TEST_CASE(a_spec_round_trips_with_the_received_fds_in_place) {
  const auto spec = sample_spec();
  auto text = encode_launch_request(spec);
  BOOST_REQUIRE_MESSAGE(text, (text ? "" : text.error().describe()));
  auto fds = open_fds(4);
  auto back = decode_launch_request(*text, fds);
  BOOST_REQUIRE_MESSAGE(back, (back ? "" : back.error().describe()));
  BOOST_TEST(back->executable == spec.executable);
  BOOST_TEST(back->argv == spec.argv, boost::test_tools::per_element());
  BOOST_TEST(back->env == spec.env, boost::test_tools::per_element());
  BOOST_REQUIRE(back->fds.size() == 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    BOOST_TEST(back->fds[i].parent_fd == fds[i].get());
    BOOST_TEST(back->fds[i].child_fd == spec.fds[i].child_fd);
  }
  BOOST_TEST((back->isolation == isolation_mode::namespaces));
  BOOST_TEST(back->namespaces.user);
  BOOST_TEST(!back->namespaces.net);
  BOOST_TEST(!back->namespaces.cgroup);
  BOOST_TEST(back->hostname == "castellan");
  BOOST_TEST(back->limits.memory_bytes == spec.limits.memory_bytes);
  BOOST_TEST(back->limits.pids == 32u);
  BOOST_TEST(back->ids.inside_gid == 1001u);
  BOOST_TEST(back->ids.outside_uid == 65534);
  BOOST_TEST(back->ids.outside_gid == id_mapping::automatic);
  BOOST_TEST(back->cgroup.directories == spec.cgroup.directories,
             boost::test_tools::per_element());
  BOOST_TEST(!back->setup_capabilities);
}

BOOST_AUTO_TEST_CASE(fds_that_do_not_match_the_spec_are_refused) {
  auto text = encode_launch_request(sample_spec());
  BOOST_REQUIRE(text);
  auto fds = open_fds(3);
  auto back = decode_launch_request(*text, fds);
  BOOST_REQUIRE(!back);
  BOOST_TEST(back.error().message.find("maps 4 fds but 3 arrived") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_malformed_request_names_the_field) {
  std::vector<unique_fd> none;
  auto not_json = decode_launch_request("{", none);
  BOOST_REQUIRE(!not_json);
  BOOST_TEST(not_json.error().message.find("launch request") == 0u);

  auto text = encode_launch_request(sample_spec());
  BOOST_REQUIRE(text);
  std::string wrong = *text;
  wrong.replace(wrong.find("\"hostname\":\"castellan\""), 22, "\"hostname\":7");
  auto fds = open_fds(4);
  auto typed = decode_launch_request(wrong, fds);
  BOOST_REQUIRE(!typed);
  BOOST_TEST(typed.error().message == "launch request: /hostname: expected a string");

  auto missing = decode_launch_request("{\"executable\":\"/x\"}", none);
  BOOST_REQUIRE(!missing);
  BOOST_TEST(missing.error().message == "launch request: /argv: missing");

  std::string nested = *text;
  nested.replace(nested.find("\"pids\":32"), 9, "\"pids\":-1");
  auto negative = decode_launch_request(nested, fds);
  BOOST_REQUIRE(!negative);
  BOOST_TEST(negative.error().message.find("/limits/pids: expected an unsigned integer") !=
             std::string::npos);

  std::string extra = *text;
  extra.insert(1, "\"surprise\":1,");
  auto unknown = decode_launch_request(extra, fds);
  BOOST_REQUIRE(!unknown);
  BOOST_TEST(unknown.error().message == "launch request: /surprise: unknown key");
}

BOOST_AUTO_TEST_CASE(mounts_do_not_travel) {
  auto spec = sample_spec();
  spec.mounts.resize(1);
  auto text = encode_launch_request(spec);
  BOOST_REQUIRE(!text);
  BOOST_TEST(text.error().message.find("spec.mounts must be empty") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(replies_round_trip_and_a_bad_one_is_refused) {
  for (auto kind : {launch_reply::kind::ready, launch_reply::kind::cloned,
                    launch_reply::kind::started}) {
    launch_reply r;
    r.what = kind;
    r.pid = 4242;
    auto back = decode_launch_reply(encode_launch_reply(r));
    BOOST_REQUIRE_MESSAGE(back, (back ? "" : back.error().describe()));
    BOOST_TEST((back->what == kind));
    BOOST_TEST(back->pid == 4242);
  }
  launch_reply failed;
  failed.error = "clone sandboxed: child: setresuid";
  failed.error_code = EPERM;
  auto b = decode_launch_reply(encode_launch_reply(failed));
  BOOST_REQUIRE(b);
  BOOST_TEST((b->what == launch_reply::kind::failed));
  BOOST_TEST(b->error == failed.error);
  BOOST_TEST(b->error_code == EPERM);

  BOOST_TEST(!decode_launch_reply("{\"pid\":0}"));
  BOOST_TEST(!decode_launch_reply("{\"pid\":\"12\"}"));
  BOOST_TEST(!decode_launch_reply("{\"error\":\"\",\"errno\":1}"));
  BOOST_TEST(!decode_launch_reply("{}"));
  BOOST_TEST(!decode_launch_reply("{\"pid\":5,\"extra\":1}"));
  BOOST_TEST(!decode_launch_reply("[]"));
}

BOOST_AUTO_TEST_SUITE_END()
