/// @file fuzz_policy_loader.cpp
/// libFuzzer target: arbitrary bytes through the whole policy pipeline —
/// JSON reading, schema and semantic validation, compilation — and, when a
/// policy is accepted, a few checks on both evaluators, which must agree.
/// Nothing may crash, hang, throw or leak.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/linear_policy.hpp"
#include "actors/policy/engine/policy_parser.hpp"

namespace pol = castellan::policy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  auto doc = pol::parse_policy(text, "<fuzz>");
  if (!doc) {
    for (const auto& e : doc.errors())
      if (e.message.empty())
        std::abort(); // every error must say why
    return 0;
  }
  const pol::linear_policy linear{*doc};
  const auto compiled = pol::compiled_policy::compile(std::move(*doc), "fuzz");
  // Queries derived from the input itself reach the rules it wrote.
  const std::string_view probe = text.substr(0, std::min<size_t>(text.size(), 64));
  const std::string_view paths[] = {"/", "/tmp/x", "/usr/lib/python3/os.py", "/a/b/../c", probe};
  for (auto path : paths) {
    for (pol::fs_access a :
         {pol::to_access(pol::fs_perm::read_file),
          pol::to_access(pol::fs_perm::write_file) | pol::to_access(pol::fs_perm::make_reg)})
      if (compiled->check_fs(path, a) != linear.check_fs(path, a))
        std::abort();
    if (compiled->check_exec(path) != linear.check_exec(path))
      std::abort();
  }
  for (const char* addr : {"10.0.0.1", "8.8.8.8", "::1", "2001:db8::1", "::ffff:10.0.0.1"})
    for (uint16_t port : {uint16_t{0}, uint16_t{80}, uint16_t{443}, uint16_t{65535}})
      for (std::string_view host : {std::string_view{}, std::string_view{"api.github.com"}, probe})
        if (compiled->check_net(pol::net_proto::tcp, addr, port, host) !=
            linear.check_net(pol::net_proto::tcp, addr, port, host))
          std::abort();
  return 0;
}
