#include "apps/castellan/sse_reader.hpp"

namespace castellan::cli {

bool sse_reader::feed(std::string_view piece, const handler& on_event) {
  pending_.append(piece.data(), piece.size());
  std::size_t start = 0;
  bool go_on = true;
  for (std::size_t end = pending_.find("\n\n"); go_on && end != std::string::npos;
       end = pending_.find("\n\n", start)) {
    std::string_view block(pending_.data() + start, end - start);
    start = end + 2;
    std::string name = "message";
    std::string data;
    bool has_data = false;
    while (!block.empty()) {
      const auto nl = block.find('\n');
      std::string_view line = block.substr(0, nl);
      block = nl == std::string_view::npos ? std::string_view{} : block.substr(nl + 1);
      if (!line.empty() && line.back() == '\r')
        line.remove_suffix(1);
      const auto colon = line.find(':');
      if (line.empty() || colon == 0) // a comment
        continue;
      const std::string_view field = line.substr(0, colon);
      std::string_view value =
        colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ')
        value.remove_prefix(1);
      if (field == "event") {
        name.assign(value.data(), value.size());
      } else if (field == "data") {
        if (has_data)
          data.push_back('\n');
        data.append(value.data(), value.size());
        has_data = true;
      }
    }
    // An event without data is dispatched by no browser either.
    if (has_data)
      go_on = on_event(name, data);
  }
  pending_.erase(0, start);
  return go_on;
}

} // namespace castellan::cli
