// docs/openapi.json against a real `castellan serve`: every route is asked,
// for its answer and its errors, and every body it answers is validated
// (valijson, JSON Schema draft 7) against the schema the document gives
// for that route, method and status. The schemas close every object
// (additionalProperties false) and require what is always there, so a
// response that gains a field the document does not declare, or loses one
// it requires, fails here.

#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#define VALIJSON_USE_EXCEPTIONS 1
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/http_client.hpp"
#include "support/serve_process.hpp"

using castellan::test::http_client;
using castellan::test::http_reply;
using castellan::test::serve_process;
using json = nlohmann::json;

namespace {

/// OpenAPI 3.0's `nullable: true` as JSON Schema says it: a type that also
/// admits null. The one difference between the document's schemas and
/// draft 7 that it uses.
void to_draft7(json& node) {
  if (node.is_array()) {
    for (auto& x : node)
      to_draft7(x);
    return;
  }
  if (!node.is_object())
    return;
  for (auto& [key, value] : node.items())
    if (key != "enum")
      to_draft7(value);
  auto nullable = node.find("nullable");
  if (nullable == node.end())
    return;
  const bool admits_null = nullable->get<bool>();
  node.erase(nullable);
  if (!admits_null)
    return;
  if (node.contains("type") && node["type"].is_string()) {
    node["type"] = json::array({node["type"], "null"});
    return;
  }
  json rest = node;
  node = json{{"anyOf", json::array({std::move(rest), json{{"type", "null"}}})}};
}

/// The document, and a validator for each of its component schemas.
class openapi_document {
public:
  openapi_document() {
    std::ifstream in(castellan::test::source_dir() + "/docs/openapi.json");
    BOOST_REQUIRE_MESSAGE(in, "docs/openapi.json cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    doc_ = json::parse(text.str());
    components_ = json{{"components", doc_["components"]}};
    to_draft7(components_);
  }

  const json& doc() const { return doc_; }

  /// Every way `value` breaks the component schema `name`; empty when none.
  std::vector<std::string> violations(const std::string& name, const json& value) const {
    json root = components_;
    root["allOf"] = json::array({json{{"$ref", "#/components/schemas/" + name}}});
    valijson::Schema schema;
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter schema_adapter(root);
    parser.populateSchema(schema_adapter, schema);
    valijson::Validator validator(valijson::Validator::kStrongTypes);
    valijson::ValidationResults results;
    valijson::adapters::NlohmannJsonAdapter target(value);
    std::vector<std::string> out;
    if (validator.validate(schema, target, &results))
      return out;
    valijson::ValidationResults::Error e;
    while (results.popError(e)) {
      std::string where;
      for (const auto& c : e.context)
        where += c;
      out.push_back(where + ": " + e.description);
    }
    return out;
  }

  /// The component schema the document names for this answer, "" for none.
  std::string response_schema(const std::string& path, const std::string& method,
                               unsigned status, const std::string& media) const {
    const json& op = doc_.at("paths").at(path).at(method);
    const auto& responses = op.at("responses");
    const std::string code = std::to_string(status);
    if (!responses.contains(code))
      return {};
    const json& content = responses.at(code).at("content");
    if (!content.contains(media))
      return {};
    const json& schema = content.at(media).at("schema");
    if (!schema.contains("$ref"))
      return "(inline)";
    const std::string ref = schema.at("$ref");
    return ref.substr(ref.rfind('/') + 1);
  }

private:
  json doc_;
  json components_;
};

/// Validates each answer against the document and remembers which
/// (route, method, status) were seen.
struct conformance {
  const openapi_document& api;
  std::set<std::tuple<std::string, std::string, unsigned>> seen;

  /// `reply`, answered to `method` on the route `path` (as the document
  /// names it), must be what the document says.
  void check(const std::string& path, const std::string& method, const http_reply& reply) {
    BOOST_TEST_CONTEXT(method << " " << path << " → " << reply.status << ": " << reply.body) {
      BOOST_REQUIRE_MESSAGE(reply.status != 0, "no answer");
      const std::string media = reply.content_type.substr(0, reply.content_type.find(';'));
      const std::string name = api.response_schema(path, method, reply.status, media);
      BOOST_REQUIRE_MESSAGE(!name.empty(), "the document has no " << media << " response "
                                                                  << reply.status);
      seen.emplace(path, method, reply.status);
      if (name == "(inline)") {
        BOOST_TEST(!reply.body.empty());
        return;
      }
      const auto errors = api.violations(name, json::parse(reply.body));
      BOOST_TEST(errors.empty(), name << ": " << (errors.empty() ? "" : errors.front()));
    }
  }

  /// A request body that the server accepted must be one the document allows.
  void check_request(const std::string& schema, const json& body) {
    const auto errors = api.violations(schema, body);
    BOOST_TEST(errors.empty(), schema << " " << body.dump() << ": "
                                      << (errors.empty() ? "" : errors.front()));
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(cli_serve_openapi)

BOOST_AUTO_TEST_CASE(the_validator_refuses_a_field_gained_or_lost) {
  openapi_document api;
  const json good = {{"v", 1}, {"exec_id", 3}, {"cancelled", true}, {"outcome", "cancelled_running"}};
  BOOST_TEST(api.violations("CancelReply", good).empty());
  json gained = good;
  gained["surprise"] = 1;
  BOOST_TEST(!api.violations("CancelReply", gained).empty());
  json lost = good;
  lost.erase("exec_id");
  BOOST_TEST(!api.violations("CancelReply", lost).empty());
  json wrong = good;
  wrong["outcome"] = "maybe";
  BOOST_TEST(!api.violations("CancelReply", wrong).empty());
  // Nested objects are closed too, and nullable means null or the type.
  json status_error = {{"v", 1}, {"error", {{"code", "x"}, {"message", "y"}, {"extra", 1}}}};
  BOOST_TEST(!api.violations("Error", status_error).empty());
  BOOST_TEST(api.violations("PolicyEvent",
                            {{"kind", "policy_warning"}, {"syscall", "openat"}, {"target", "/x"},
                             {"decision", "warn"}, {"rule", "/fs/rules/0"}, {"pid", 7},
                             {"timestamp_ns", 1}})
                 .empty());
}

BOOST_AUTO_TEST_CASE(every_route_answers_as_the_document_says) {
  openapi_document api;
  conformance c{api, {}};
  serve_process serve({"--max-body-bytes", "4096"});
  serve.first_line();
  http_client h(serve.socket_path);
  auto post = [&](const std::string& path, const json& body) { return h.post(path, body); };

  // -- health, exec, run ------------------------------------------------------
  c.check("/v1/health", "get", h.get("/v1/health"));
  const json ok_exec = {{"code", "print(6*7)"}, {"id", "first"}, {"timeout_ms", 10000}};
  c.check_request("ExecRequest", ok_exec);
  auto ok = post("/v1/exec", ok_exec);
  BOOST_TEST(ok.status == 200u);
  BOOST_TEST(ok.json()["id"] == "first");
  BOOST_TEST(ok.json()["enforcement"].is_object()); // the worker's report, as an object
  c.check("/v1/exec", "post", ok);
  c.check("/v1/exec", "post", post("/v1/exec", {{"code", "raise ValueError(42)"}}));
  c.check("/v1/exec", "post", post("/v1/exec", {{"code", "while True: pass"}, {"timeout_ms", 200}}));
  const json ok_run = {{"argv", {"/usr/bin/python3", "-c", "print(1)"}}};
  c.check_request("RunRequest", ok_run);
  c.check("/v1/run", "post", post("/v1/run", ok_run));
  c.check("/v1/exec", "post", h.request("POST", "/v1/exec", "{\"code\": "));
  c.check("/v1/exec", "post", post("/v1/exec", {{"code", "1"}, {"cwd", 5}}));
  const json with_setup = {{"code", "import os, sys; print(os.environ['A'], sys.stdin.read())"},
                           {"env", {{"A", "1"}}},
                           {"stdin", "in"}};
  c.check_request("ExecRequest", with_setup);
  c.check("/v1/exec", "post", post("/v1/exec", with_setup));
  const json with_files = {{"code", "open('o.txt', 'w').write(open('i.txt').read())"},
                           {"files_in", {{{"path", "i.txt"}, {"content", "x"}, {"mode", 384}}}},
                           {"files_out", {"o.txt", "none"}}};
  c.check_request("ExecRequest", with_files);
  auto files = post("/v1/exec", with_files);
  BOOST_TEST(files.json()["files"][0]["content"] == "x", files.body);
  c.check("/v1/exec", "post", files);
  c.check("/v1/exec", "post", post("/v1/exec", {{"code", "1"}, {"files_out", {"../x"}}}));
  // Output that is not UTF-8 comes as base64.
  c.check("/v1/exec", "post",
          post("/v1/exec", {{"code", "import sys; sys.stdout.buffer.write(b'\\xff')"}}));
  c.check("/v1/exec", "post", post("/v1/exec", {{"code", "1"}, {"id", "12"}}));
  c.check("/v1/run", "post", post("/v1/run", {{"argv", json::array()}}));
  c.check("/v1/exec", "post", post("/v1/exec", {{"code", "1"}, {"pool", "gpu"}}));
  c.check("/v1/exec", "post", h.request("POST", "/v1/exec", R"({"code":"1"})", "text/plain"));
  c.check("/v1/exec", "post", h.get("/v1/exec"));
  {
    http_client big(serve.socket_path);
    c.check("/v1/exec", "post", big.post("/v1/exec", {{"code", std::string(5000, '#')}}));
  }

  // -- an exec in flight: 409, status, DELETE ---------------------------------
  auto running = std::async(std::launch::async, [&] {
    http_client r(serve.socket_path);
    return r.post("/v1/exec", {{"code", "import time; time.sleep(120)"}, {"id", "long"}});
  });
  castellan::test::wait_until(serve.socket_path, "/v1/pools", [](const http_reply& r) {
    return r.status == 200 && r.json()["pools"][0]["busy"] == 1;
  });
  auto dup = post("/v1/exec", {{"code", "1"}, {"id", "long"}});
  BOOST_TEST(dup.status == 409u);
  c.check("/v1/exec", "post", dup);
  auto status = h.get("/v1/status");
  BOOST_TEST(status.json()["in_flight"] == 1);
  c.check("/v1/status", "get", status);
  auto del = h.request("DELETE", "/v1/execs/long");
  BOOST_TEST(del.status == 202u);
  c.check("/v1/execs/{id}", "delete", del);
  auto cancelled = running.get();
  BOOST_TEST(cancelled.json()["error_class"] == "cancelled");
  c.check("/v1/exec", "post", cancelled);
  c.check("/v1/execs/{id}", "delete", h.request("DELETE", "/v1/execs/long"));
  c.check("/v1/execs/{id}", "delete", h.get("/v1/execs/long"));

  // -- policies ---------------------------------------------------------------
  const json valid = {{"policy", {{"version", 1}, {"extends", {"default"}}}}};
  c.check_request("PolicyCheckRequest", valid);
  c.check("/v1/policies/check", "post", post("/v1/policies/check", valid));
  auto invalid = post("/v1/policies/check", {{"policy", {{"version", 1}, {"colour", "red"}}}});
  BOOST_TEST(invalid.json()["valid"] == false);
  c.check("/v1/policies/check", "post", invalid);
  c.check("/v1/policies/check", "post",
          post("/v1/policies/check", {{"policy", {{"version", 1}, {"extends", {"../x.json"}}}}}));
  c.check("/v1/policies/check", "post",
          h.request("POST", "/v1/policies/check", R"({"policy":{}})", "text/plain"));
  const json named = {{"name", "lambda-backend"},
                      {"fs", {"read_file:/etc/passwd", "write_file:/tmp/x"}},
                      {"net", "connect:tcp:1.2.3.4:443"},
                      {"exec", "/usr/bin/id"}};
  c.check_request("PolicyExplainRequest", named);
  auto explained = post("/v1/policies/explain", named);
  BOOST_TEST(explained.status == 200u);
  c.check("/v1/policies/explain", "post", explained);
  const json posted = {{"policy",
                        {{"version", 1},
                         {"extends", {"default"}},
                         {"fs", {{"rules", {{{"action", "deny"}, {"path", "/etc/passwd"},
                                             {"perms", {"read_file"}}}}}}}}},
                       {"fs", "read_file:/etc/passwd"}};
  c.check_request("PolicyExplainRequest", posted);
  auto with_origin = post("/v1/policies/explain", posted);
  BOOST_TEST(with_origin.json()["decisions"][0].contains("origin"));
  c.check("/v1/policies/explain", "post", with_origin);
  c.check("/v1/policies/explain", "post",
          post("/v1/policies/explain", {{"name", "nope"}, {"exec", "/usr/bin/id"}}));
  c.check("/v1/policies/explain", "post",
          post("/v1/policies/explain", {{"name", "strict"}, {"net", "tcp:1.2.3.4"}}));

  // -- pools, metrics, an unknown route ---------------------------------------
  c.check("/v1/pools", "get", h.get("/v1/pools"));
  auto metrics = h.get("/metrics");
  BOOST_TEST(metrics.content_type == "text/plain; version=0.0.4; charset=utf-8");
  c.check("/metrics", "get", metrics);
  auto unknown = h.get("/v2/nothing");
  BOOST_TEST(unknown.status == 404u);
  BOOST_TEST(api.violations("Error", unknown.json()).empty(), unknown.body);

  // -- the audit stream -------------------------------------------------------
  // This daemon records no audit; a second one, from a config, does.
  c.check("/v1/audit", "get", h.get("/v1/audit"));
  c.check("/v1/audit", "get", h.get("/v1/audit?since=1h"));
  {
    char tmpl[] = "/tmp/castellan-openapi-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    const std::string dir = tmpl;
    const std::string config = dir + "/castellan.toml";
    std::ofstream(config) << "state_dir = \"" << dir << "/state\"\n"
                          << "[audit]\nfile = \"audit.jsonl\"\n"
                          << "[[pools]]\nname = \"default\"\nsize = 1\n";
    serve_process audited({"--config", config});
    BOOST_REQUIRE(audited.first_line().find("listening") != std::string::npos);
    http_client a(audited.socket_path);
    c.check("/v1/audit", "get", a.get("/v1/audit?kind=exec_end,nope"));
    c.check("/v1/audit", "get", a.get("/v1/audit?exec=x"));
    c.check("/v1/audit", "get", a.get("/v1/audit?since=later"));
    c.check("/v1/audit", "get", a.get("/v1/audit?colour=red"));
    c.check("/v1/audit", "get", a.request("POST", "/v1/audit", "{}"));
    // A stream never ends by itself: its head and first events are checked.
    http_client s(audited.socket_path);
    s.send("GET", "/v1/audit?since=1h&kind=exec_start&kind=exec_end", {}, "",
           {{"Accept", "text/event-stream"}});
    std::string seen;
    char buf[4096];
    while (seen.find("event: live\n") == std::string::npos) {
      boost::system::error_code ec;
      const std::size_t n = s.socket().read_some(boost::asio::buffer(buf), ec);
      BOOST_REQUIRE_MESSAGE(!ec && n > 0, "the stream ended: " << seen);
      seen.append(buf, n);
    }
    http_reply streamed;
    const auto head_end = seen.find("\r\n\r\n");
    BOOST_REQUIRE(head_end != std::string::npos);
    streamed.status = static_cast<unsigned>(std::stoul(seen.substr(9, 3)));
    const auto ct = seen.find("Content-Type: ");
    streamed.content_type = seen.substr(ct + 14, seen.find("\r\n", ct) - ct - 14);
    streamed.body = seen.substr(head_end + 4);
    BOOST_TEST(streamed.content_type == "text/event-stream; charset=utf-8");
    c.check("/v1/audit", "get", streamed);
    ::kill(audited.pid, SIGTERM);
    BOOST_TEST(audited.wait() == 0);
    std::system(("rm -rf '" + dir + "'").c_str());
  }

  // -- sessions ----------------------------------------------------------------
  {
    const json create = {{"idle_ttl_ms", 60000}};
    auto made = post("/v1/sessions", create);
    BOOST_REQUIRE_MESSAGE(made.status == 201u, made.body);
    c.check("/v1/sessions", "post", made);
    c.check_request("SessionRequest", create);
    const std::string one = "/v1/sessions/" + made.json()["id"].get<std::string>();
    c.check("/v1/sessions", "post", post("/v1/sessions", {{"colour", "red"}}));
    c.check("/v1/sessions", "post", post("/v1/sessions", {{"pool", "nope"}}));
    c.check("/v1/sessions", "post", h.request("POST", "/v1/sessions", "{}", "text/plain"));
    c.check("/v1/sessions", "get", h.get("/v1/sessions"));
    c.check("/v1/sessions", "get", h.request("PUT", "/v1/sessions"));
    const json setup = {{"code", "x = 1"}, {"env", {{"A", "b"}}}, {"cwd", "/tmp"}, {"id", "in-s"}};
    c.check("/v1/sessions/{id}/exec", "post", post(one + "/exec", setup));
    c.check_request("SessionExecRequest", setup);
    c.check("/v1/sessions/{id}/exec", "post",
            post(one + "/exec", {{"code", "1"}, {"pool", "default"}}));
    const json run = {{"argv", {"/usr/bin/python3", "-c", "print(1)"}}};
    c.check("/v1/sessions/{id}/run", "post", post(one + "/run", run));
    c.check_request("SessionRunRequest", run);
    c.check("/v1/sessions/{id}/run", "post", post(one + "/run", {{"argv", json::array()}}));
    c.check("/v1/sessions/{id}", "get", h.get(one));
    c.check("/v1/sessions/{id}", "get", h.get("/v1/sessions/s-0000000000000000"));
    c.check("/v1/sessions/{id}/exec", "post",
            post(one + "/exec", {{"code", "while True: pass"}, {"timeout_ms", 200}}));
    auto ended = post(one + "/exec", {{"code", "print(x)"}});
    BOOST_TEST(ended.status == 410u, ended.body);
    c.check("/v1/sessions/{id}/exec", "post", ended);
    c.check("/v1/sessions/{id}", "delete", h.request("DELETE", one));
    c.check("/v1/sessions/{id}", "delete", h.request("DELETE", one));
    c.check("/v1/sessions/{id}/exec", "post", post(one + "/exec", {{"code", "1"}}));
  }

  // -- drain: 503 and health says so ------------------------------------------
  auto last = std::async(std::launch::async, [&] {
    http_client r(serve.socket_path);
    return r.post("/v1/exec", {{"code", "import time; time.sleep(1); print('done')"}});
  });
  // Admitted by the API (the pool's busy count may still include the worker
  // of the cancelled exec above, being replaced): the drain waits for it.
  castellan::test::wait_until(serve.socket_path, "/v1/status", [](const http_reply& r) {
    return r.status == 200 && r.json()["in_flight"] == 1;
  });
  BOOST_REQUIRE(::kill(serve.pid, SIGTERM) == 0);
  auto draining = castellan::test::wait_until(serve.socket_path, "/v1/health", [](const http_reply& r) {
    return r.json()["status"] == "draining";
  });
  c.check("/v1/health", "get", draining);
  {
    http_client d(serve.socket_path);
    auto refused = d.post("/v1/exec", {{"code", "1"}});
    BOOST_TEST(refused.status == 503u);
    c.check("/v1/exec", "post", refused);
    auto st = d.get("/v1/status");
    BOOST_TEST(st.json()["draining"] == true);
    c.check("/v1/status", "get", st);
  }
  c.check("/v1/exec", "post", last.get());
  BOOST_TEST(serve.wait() == 0);

  // Every route and method the document lists was asked, and every success
  // status it declares was seen.
  for (const auto& [path, ops] : api.doc()["paths"].items())
    for (const auto& [method, op] : ops.items())
      for (const auto& [code, response] : op["responses"].items()) {
        if (code.front() != '2')
          continue;
        BOOST_TEST(c.seen.count({path, method, static_cast<unsigned>(std::stoul(code))}) == 1u,
                   method << " " << path << " " << code << " was never answered");
      }
  BOOST_TEST_MESSAGE(c.seen.size() << " (route, method, status) checked against the document");
}

BOOST_AUTO_TEST_SUITE_END()
