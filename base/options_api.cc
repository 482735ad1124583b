// The public face of the option table (include/tiermem/options.hpp): Options::Set validates
// against the same table and parsers as the environment, and Runtime::Impl::Init applies the
// values with SetOption, so there is one route into OptionValues.
#include <strings.h>

#include <cstring>

#include "base/options.h"
#include "tiermem/options.hpp"

namespace tiermem {
namespace {

const char* KindName(OptionKind k) {
  switch (k) {
    case OptionKind::kSize: return "size";
    case OptionKind::kBool: return "bool";
    case OptionKind::kUint: return "uint";
    case OptionKind::kString: return "string";
    case OptionKind::kLogLevel: return "log level";
  }
  return "?";
}

}  // namespace

const OptionSpec* FindOption(std::string_view name) {
  constexpr std::string_view kPrefix = "TIERMEM_";
  if (name.size() > kPrefix.size() && strncasecmp(name.data(), kPrefix.data(), kPrefix.size()) == 0) {
    name.remove_prefix(kPrefix.size());
  }
  size_t n = 0;
  const OptionSpec* table = OptionTable(&n);
  for (size_t i = 0; i < n; ++i) {
    const char* short_name = table[i].env + kPrefix.size();
    if (strlen(short_name) == name.size() && strncasecmp(short_name, name.data(), name.size()) == 0) {
      return &table[i];
    }
  }
  return nullptr;
}

std::vector<OptionInfo> OptionTable() {
  size_t n = 0;
  const OptionSpec* table = OptionTable(&n);
  std::vector<OptionInfo> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back({table[i].env, KindName(table[i].kind), table[i].default_value, table[i].help});
  }
  return out;
}

bool ParseSize(std::string_view text, uint64_t* out) {
  char buf[64];
  if (text.size() >= sizeof(buf)) return false;
  memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  return ParseSize(static_cast<const char*>(buf), out);
}

Options& Options::Set(std::string_view name, std::string_view value) {
  const OptionSpec* spec = FindOption(name);
  if (spec == nullptr) {
    if (status_.ok()) {
      status_ = InvalidArgument("Options: '" + std::string(name) +
                                "' is not a tiermem option (see `tiermemctl options`)");
    }
    return *this;
  }
  // Parse now, into scratch values, so a bad value is reported with its name.
  OptionValues scratch;
  LoadDefaultOptions(&scratch);
  const std::string text(value);
  if (text.find('\0') != std::string::npos || !SetOption(&scratch, *spec, text.c_str())) {
    if (status_.ok()) {
      status_ = InvalidArgument(std::string("Options: ") + spec->env + "=\"" + text +
                                "\" is not a valid " + KindName(spec->kind) + " (" + spec->help + ")");
    }
    return *this;
  }
  values_.emplace_back(spec->env, text);
  return *this;
}

}  // namespace tiermem
