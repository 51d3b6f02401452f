// The session routes' paths and bodies (actors/api/session_json.hpp) and
// who reaches which session (session_registry.hpp), without a server.

#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include "actors/api/session_json.hpp"
#include "actors/api/session_registry.hpp"

using namespace castellan;
using namespace castellan::api;
using kind = session_route::kind;

BOOST_AUTO_TEST_SUITE(api_session_json)

BOOST_AUTO_TEST_CASE(paths_name_their_route_and_session) {
  struct c {
    const char* path;
    kind type;
    const char* id;
  };
  for (const auto& t : {c{"/v1/sessions", kind::collection, ""},
                        c{"/v1/sessions/", kind::collection, ""},
                        c{"/v1/sessions/s-0123456789abcdef", kind::one, "s-0123456789abcdef"},
                        c{"/v1/sessions/s-1/exec", kind::exec, "s-1"},
                        c{"/v1/sessions/s-1/run", kind::run, "s-1"},
                        c{"/v1/sessions/s-1/files/x", kind::files, "s-1"},
                        c{"/v1/sessions/s-1/files", kind::files, "s-1"},
                        c{"/v1/sessions/s-1/filesx", kind::unknown, "s-1"},
                        c{"/v1/sessions/s-1/exec/", kind::unknown, "s-1"},
                        c{"/v1/sessions//exec", kind::unknown, ""},
                        c{"/v1/sessionsx", kind::none, ""},
                        c{"/v1/exec", kind::none, ""}}) {
    const auto r = match_session_route(t.path);
    BOOST_TEST(static_cast<int>(r.type) == static_cast<int>(t.type), t.path);
    BOOST_TEST(r.id == t.id, t.path);
  }
}

BOOST_AUTO_TEST_CASE(a_create_body_is_read_strictly) {
  auto ok = parse_session_options(R"({"pool":"gpu","idle_ttl_ms":5,"max_lifetime_ms":9})");
  BOOST_REQUIRE(std::holds_alternative<session_options>(ok));
  const auto& o = std::get<session_options>(ok);
  BOOST_TEST(o.pool == "gpu");
  BOOST_TEST(o.idle_ttl_ms == 5u);
  BOOST_TEST(o.max_lifetime_ms == 9u);
  BOOST_TEST(o.owner.empty(), "the owner is the caller's, never the body's");
  BOOST_TEST(std::holds_alternative<session_options>(parse_session_options("")));
  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"owner":"ops"})", "/owner"},
           {R"({"pool":""})", "/pool"},
           {R"({"idle_ttl_ms":0})", "/idle_ttl_ms"},
           {R"({"idle_ttl_ms":1.5})", "/idle_ttl_ms"},
           {R"({"max_lifetime_ms":-1})", "/max_lifetime_ms"},
           {R"({"workspace":3})", "/workspace"},
           {R"({"workspace":""})", "/workspace"},
           {R"([])", ""}}) {
    auto r = parse_session_options(body);
    BOOST_REQUIRE_MESSAGE(std::holds_alternative<api_error>(r), body);
    BOOST_TEST(std::get<api_error>(r).field == field, body);
    BOOST_TEST(std::get<api_error>(r).status == 400u, body);
  }
}

BOOST_AUTO_TEST_CASE(stats_leave_out_the_host_pid) {
  session_stats s;
  s.info.id = "s-1";
  s.info.owner = "ci";
  s.state = session_state::ended;
  s.end_reason = "why";
  s.worker.pid = 4242;
  s.worker.pids = 3;
  const auto j = nlohmann::json::parse(session_stats_body(s));
  BOOST_TEST(j["state"] == "ended");
  BOOST_TEST(j["end_reason"] == "why");
  BOOST_TEST(j["worker"]["tasks"] == 3);
  BOOST_TEST(j.dump().find("4242") == std::string::npos);
  BOOST_TEST(j["created"] == "1970-01-01T00:00:00.000000000Z");
}

BOOST_AUTO_TEST_CASE(a_token_reaches_its_own_sessions_only) {
  session_registry reg;
  session_info a;
  a.id = "s-a";
  a.owner = "ci";
  a.pool = "default";
  session_info b = a;
  b.id = "s-b";
  b.owner = "";
  reg.replace({a, b});
  caller ci;
  ci.type = caller::kind::token;
  ci.name = "ci";
  caller ops = ci;
  ops.name = "ops";
  caller socket;
  BOOST_TEST(reg.find("s-a", ci) != nullptr);
  BOOST_TEST(reg.find("s-a", ops) == nullptr);
  BOOST_TEST(reg.find("s-b", ci) == nullptr, "a session without an owner is not a token's");
  BOOST_TEST(reg.find("s-a", socket) != nullptr);
  BOOST_TEST(reg.find("s-b", socket) != nullptr);
  BOOST_TEST(reg.find("s-a", ci)->pool == "default");
  reg.erase("s-a");
  BOOST_TEST(reg.find("s-a", ci) == nullptr);
  reg.replace({b});
  BOOST_TEST(reg.size() == 1u);
  BOOST_TEST(owner_of(ci) == "ci");
  BOOST_TEST(owner_of(socket) == "");
}

BOOST_AUTO_TEST_SUITE_END()
