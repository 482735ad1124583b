#include "runtime/paging/server_file.h"

#include <algorithm>

namespace tiermem {

ServerFileEntries ParseServerFile(std::string_view text) {
  ServerFileEntries out;
  std::vector<std::string> seen;
  auto take = [&](std::string_view item) {
    if (item.empty()) return;
    auto ep = remote::ParseEndpoint(std::string(item));
    if (!ep.ok()) {
      out.bad.push_back(std::string(item) + " (" + ep.status().message() + ")");
      return;
    }
    std::string name = ep->ToString();
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) return;
    seen.push_back(std::move(name));
    out.servers.push_back(*ep);
  };
  bool comment = false;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : '\n';
    const bool ends = c == '\n' || c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '#';
    if (!ends) continue;
    if (!comment) take(text.substr(start, i - start));
    if (c == '#') comment = true;
    if (c == '\n') comment = false;
    start = i + 1;
  }
  return out;
}

}  // namespace tiermem
