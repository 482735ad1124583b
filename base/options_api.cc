// The public face of the option table (include/tiermem/options.hpp): Options::Set and
// OptionFromEnv validate against the same table, parsers and checks as the environment, and Runtime::Impl::Init applies the
// values with SetOption, so there is one route into OptionValues.
#include <strings.h>

#include <cstring>

#include "base/options.h"
#include "base/os.h"
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

// Ok, or InvalidArgument naming the variable, the value and what the table accepts.
Status CheckValue(const OptionSpec& spec, const std::string& text) {
  OptionValues scratch;
  LoadDefaultOptions(&scratch);
  if (text.find('\0') == std::string::npos && SetOption(&scratch, spec, text.c_str())) return Status::Ok();
  char accepted[160];
  DescribeAccepted(spec, accepted, sizeof(accepted));
  return InvalidArgument(std::string(spec.env) + "=\"" + text + "\" is not valid (expected " + accepted + ")");
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
  // Checked now, into scratch values, by the table's rules: a bad value is reported with its
  // name here, never refused or reinterpreted later by Runtime::Start.
  const std::string text(value);
  Status s = CheckValue(*spec, text);
  if (!s.ok()) {
    if (status_.ok()) status_ = InvalidArgument("Options: " + s.message());
    return *this;
  }
  values_.emplace_back(spec->env, text);
  return *this;
}

Status OptionFromEnv(std::string_view name, std::string* value) {
  const OptionSpec* spec = FindOption(name);
  if (spec == nullptr) {
    return InvalidArgument("'" + std::string(name) + "' is not a tiermem option (see `tiermemctl options`)");
  }
  const char* v = os::GetEnv(spec->env);
  if (v == nullptr) return Status::Ok();
  TIERMEM_RETURN_IF_ERROR(CheckValue(*spec, v));
  *value = v;
  return Status::Ok();
}

}  // namespace tiermem
