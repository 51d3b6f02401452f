#include "actors/policy/engine/schema_validator.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#define VALIJSON_USE_EXCEPTIONS 1
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "actors/policy/engine/json_reader.hpp"
#include "actors/policy/engine/policy_schema.hpp"

namespace castellan::policy {

namespace {

using json = nlohmann::json;

/// The schema, parsed once. A schema that does not parse is a build defect,
/// not an input error: abort loudly.
struct schema_holder {
  json doc;
  valijson::Schema schema;

  schema_holder() {
    const auto text = policy_schema_text();
    doc = json::parse(text.begin(), text.end(), nullptr, false);
    if (doc.is_discarded()) {
      std::fputs("castellan: embedded policy schema is not valid JSON\n", stderr);
      std::abort();
    }
    try {
      valijson::SchemaParser parser{valijson::SchemaParser::kDraft7};
      valijson::adapters::NlohmannJsonAdapter adapter{doc};
      parser.populateSchema(adapter, schema);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "castellan: embedded policy schema rejected: %s\n", ex.what());
      std::abort();
    }
  }
};

const schema_holder& holder() {
  static const schema_holder instance;
  return instance;
}

const json* deref(const json& root, const json* node) {
  for (int hops = 0; node != nullptr && hops < 8; ++hops) {
    if (!node->is_object())
      return node;
    auto ref = node->find("$ref");
    if (ref == node->end() || !ref->is_string())
      return node;
    const std::string& target = ref->get_ref<const std::string&>();
    if (target.rfind("#/", 0) != 0)
      return nullptr;
    const json::json_pointer ptr{target.substr(1)};
    if (!root.contains(ptr))
      return nullptr;
    node = &root.at(ptr);
  }
  return node;
}

// The schema node that describes the instance at `tokens` (our schema only
// uses properties, items and local $ref, so the walk is unambiguous).
const json* schema_node(const json& root, const std::vector<std::string>& tokens) {
  const json* node = deref(root, &root);
  for (const auto& tok : tokens) {
    if (node == nullptr || !node->is_object())
      return nullptr;
    if (auto props = node->find("properties"); props != node->end() && props->contains(tok)) {
      node = deref(root, &(*props)[tok]);
      continue;
    }
    if (auto items = node->find("items"); items != node->end() && items->is_object()) {
      node = deref(root, &*items);
      continue;
    }
    return nullptr;
  }
  return node;
}

std::string json_type_name(const json& v) {
  switch (v.type()) {
  case json::value_t::null:
    return "null";
  case json::value_t::boolean:
    return "boolean";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
    return "integer";
  case json::value_t::number_float:
    return "number";
  case json::value_t::string:
    return "string";
  case json::value_t::array:
    return "array";
  case json::value_t::object:
    return "object";
  default:
    return "value";
  }
}

std::string join_values(const json& list, std::string_view sep) {
  std::string out;
  for (const auto& v : list) {
    if (!out.empty())
      out += sep;
    out += v.is_string() ? "\"" + v.get<std::string>() + "\"" : v.dump();
  }
  return out;
}

std::string join_keys(const json& object) {
  std::string out;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (!out.empty())
      out += ", ";
    out += it.key();
  }
  return out;
}

// The text between the last pair of single quotes of `text`.
std::string quoted_tail(const std::string& text) {
  const auto close = text.rfind('\'');
  if (close == std::string::npos || close == 0)
    return {};
  const auto open = text.rfind('\'', close - 1);
  if (open == std::string::npos)
    return {};
  return text.substr(open + 1, close - open - 1);
}

bool starts_with(const std::string& text, std::string_view prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// Messages for the numeric bounds (minimum, maxLength, …), with the bound
// taken from the schema rather than valijson's floating-point rendering.
std::optional<std::string> bound_message(const std::string& d, const json* node) {
  struct bound {
    std::string_view prefix;
    const char* keyword;
    std::string_view before;
    std::string_view after;
  };
  static constexpr bound bounds[] = {
      {"Expected number greater than or equal to", "minimum", "must be >= ", ""},
      {"Expected number less than or equal to", "maximum", "must be <= ", ""},
      {"String should be no fewer than", "minLength", "must be at least ", " characters long"},
      {"String should be no more than", "maxLength", "must be at most ", " characters long"},
      {"Array should contain no fewer than", "minItems", "must have at least ", " items"},
      {"Array should contain no more than", "maxItems", "must have at most ", " items"},
  };
  for (const auto& b : bounds) {
    if (!starts_with(d, b.prefix))
      continue;
    if (node == nullptr || !node->contains(b.keyword))
      return std::nullopt;
    return std::string{b.before} + (*node)[b.keyword].dump() + std::string{b.after} +
           " (schema: " + b.keyword + ")";
  }
  return std::nullopt;
}

} // namespace

std::vector<policy_error> validate_against_schema(const json& doc, std::string_view file) {
  std::vector<policy_error> out;
  const auto& h = holder();
  valijson::ValidationResults results;
  try {
    valijson::Validator validator{valijson::Validator::kStrongTypes};
    valijson::adapters::NlohmannJsonAdapter target{doc};
    if (validator.validate(h.schema, target, &results))
      return out;
  } catch (const std::exception& ex) {
    out.push_back(policy_error{std::string{file}, "", "",
                               std::string{"schema validation failed: "} + ex.what()});
    return out;
  }
  valijson::ValidationResults::Error err;
  while (results.popError(err)) {
    const auto& d = err.description;
    // Summaries of errors that are reported on their own, deeper down.
    if (starts_with(d, "Failed to validate against schema associated with property") ||
        starts_with(d, "Failed to validate item #") ||
        starts_with(d, "Failed to validate against additional properties schema") ||
        starts_with(d, "Failed to validate against child schema"))
      continue;
    std::vector<std::string> tokens;
    for (size_t i = 1; i < err.context.size(); ++i) {
      const auto& c = err.context[i];
      tokens.push_back(
          c.size() >= 2 && c.front() == '[' && c.back() == ']' ? c.substr(1, c.size() - 2) : c);
    }
    std::string pointer;
    for (const auto& t : tokens)
      pointer = append_pointer(std::move(pointer), t);
    const json* value = nullptr;
    try {
      const json::json_pointer ptr{pointer};
      if (doc.contains(ptr))
        value = &doc.at(ptr);
    } catch (const std::exception&) {
      value = nullptr;
    }
    const json* node = schema_node(h.doc, tokens);
    policy_error e{std::string{file}, pointer, value ? render_value(*value) : "", ""};
    if (starts_with(d, "Failed to match against any enum values") && node &&
        node->contains("enum")) {
      e.message = "must be one of " + join_values((*node)["enum"], ", ") + " (schema: enum)";
    } else if (starts_with(d, "Value type not permitted by 'type' constraint") && node &&
               node->contains("type")) {
      const json& t = (*node)["type"];
      e.message = "must be " + (t.is_array() ? join_values(t, " or ") : t.dump()) + ", not " +
                  (value ? json_type_name(*value) : std::string{"this"}) + " (schema: type)";
    } else if (starts_with(d, "Failed to match expected value set by 'const'") && node &&
               node->contains("const")) {
      e.message = "must be " + (*node)["const"].dump() + " (schema: const)";
    } else if (starts_with(d, "Missing required property")) {
      e.value.clear(); // the enclosing object: the pointer says enough
      e.message = "missing required property \"" + quoted_tail(d) + "\" (schema: required)";
    } else if (auto bound = bound_message(d, node)) {
      e.message = *bound;
    } else if (starts_with(d, "Object contains a property that could not be validated")) {
      const std::string name = quoted_tail(d);
      e.pointer = append_pointer(pointer, name);
      e.value.clear();
      if (value && value->is_object() && value->contains(name))
        e.value = render_value((*value)[name]);
      std::string allowed;
      if (node && node->contains("properties"))
        allowed = " (allowed: " + join_keys((*node)["properties"]) + ")";
      e.message = "unknown property \"" + name + "\"" + allowed + " (schema: additionalProperties)";
    } else if (starts_with(d, "Elements of array are not unique")) {
      e.message = "items must be unique (schema: uniqueItems)";
    } else {
      std::string text = d;
      if (!text.empty() && text.back() == '.')
        text.pop_back();
      e.message = text + " (schema)";
    }
    out.push_back(std::move(e));
  }
  return out;
}

} // namespace castellan::policy
