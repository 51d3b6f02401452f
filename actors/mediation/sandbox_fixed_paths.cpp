#include "actors/mediation/sandbox_fixed_paths.hpp"

namespace castellan {

const std::vector<std::string>& elf_loaders() {
  static const std::vector<std::string> loaders = {
      "/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1",
      "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
      "/usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1"};
  return loaders;
}

} // namespace castellan
