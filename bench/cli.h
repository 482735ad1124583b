// Argument parsing shared by tiermem-bench's subcommands: CLI11 apps with tiermem's own number
// syntax (sizes with K/M/G suffixes, plain unsigned integers) and bounds, flags that show their
// default in --help, and one exit status for every bad argument.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace tiermem::bench {

// The parsers of base/options.h, passed in so that this header needs nothing from the runtime:
// ParseSize ("64M", "1.5G", "4096") or ParseUint (decimal digits only).
using NumberParser = bool (*)(std::string_view text, uint64_t* out);

// A CLI11 transform: the value must read with `parse` and lie in [min, max] (both written in the
// same syntax, e.g. "8M" and "256G"); it is replaced by its decimal value, which the option's
// integer then takes. `what` names the syntax in the error ("a size", "a number").
inline CLI::Validator Within(NumberParser parse, const std::string& min, const std::string& max = "",
                             const std::string& what = "a number") {
  uint64_t lo = 0, hi = UINT64_MAX;
  parse(min.c_str(), &lo);
  if (!max.empty()) parse(max.c_str(), &hi);
  const std::string range = !max.empty() ? " from " + min + " to " + max : lo > 0 ? " of at least " + min : "";
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        uint64_t v = 0;
        if (!parse(value.c_str(), &v) || v < lo || v > hi) {
          return "'" + value + "' is not " + what + range;
        }
        value = std::to_string(v);
        return "";
      },
      "", "");
}

inline CLI::Validator SizeWithin(NumberParser parse_size, const std::string& min, const std::string& max = "") {
  return Within(parse_size, min, max, "a size (e.g. 64M, 1.5G)");
}

// A byte count in ParseSize's syntax (`parse_size`), within [min, max] ("" max: no bound);
// --help shows `shown_default` (e.g. "256M") as its default.
template <class T>
CLI::Option* AddSize(CLI::App& app, const std::string& name, T& bytes, NumberParser parse_size,
                     const std::string& shown_default, const std::string& min, const std::string& max,
                     const std::string& help) {
  return app.add_option(name, bytes, help)
      ->transform(SizeWithin(parse_size, min, max))
      ->type_name("SIZE")
      ->default_str(shown_default);
}

// A count in ParseUint's syntax (`parse_uint`), within [min, max]; --help shows its default.
template <class T>
CLI::Option* AddCount(CLI::App& app, const std::string& name, T& n, NumberParser parse_uint, const std::string& min,
                      const std::string& max, const std::string& help) {
  return app.add_option(name, n, help)->transform(Within(parse_uint, min, max))->type_name("N")->capture_default_str();
}

// --quick's values: `value` into `var` unless the option was given.
template <class T, class V>
void UnlessGiven(const CLI::Option* option, T& var, V value) {
  if (option->count() == 0) var = static_cast<T>(value);
}

// Splits "a,b,c" at its commas; empty items ("a,,b", "") are kept when keep_empty.
inline std::vector<std::string> SplitList(const std::string& list, bool keep_empty = false) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    if (keep_empty || comma > at) out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// A comma-separated list of at least one of `names`; empty items are an error unless skipped
// (skip_empty: "a,,b" is "a,b").
inline CLI::Validator ListOf(const std::vector<std::string>& names, bool skip_empty = false) {
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        const std::vector<std::string> items = SplitList(value, !skip_empty);
        if (items.empty()) return "an empty list (items: " + all + ")";
        for (const auto& item : items) {
          if (std::find(names.begin(), names.end(), item) == names.end()) {
            return "unknown item '" + item + "' (items: " + all + ")";
          }
        }
        return "";
      },
      "", "");
}

// A switch, shown in --help with its default (off).
inline CLI::Option* AddSwitch(CLI::App& app, const std::string& name, bool& on, const std::string& help) {
  return app.add_flag(name, on, help + " (default: off)");
}

// "tiermem-bench SUBCOMMAND ARGS...", the command line of a run for its JSON (argv[0]: the
// subcommand).
inline std::string CommandLine(int argc, char** argv) {
  std::string command = "tiermem-bench";
  for (int i = 0; i < argc; ++i) command += std::string(" ") + argv[i];
  return command;
}

// tiermem-bench's help: the list of subcommands shows each one's one-line summary, while the
// subcommand's own --help starts with its full description.
class BenchFormatter : public CLI::Formatter {
 public:
  void Summary(const CLI::App* sub, std::string text) { summaries_[sub] = std::move(text); }
  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    const auto it = summaries_.find(sub);
    CLI::detail::format_help(out, sub->get_display_name(true),
                             it != summaries_.end() ? it->second : sub->get_description(), column_width_);
    return out.str();
  }

 private:
  std::map<const CLI::App*, std::string> summaries_;
};

// A subcommand of tiermem-bench: its CLI11 app (options, help) and what runs it once the command
// line is parsed. `run` gets the whole command line (for the JSON) and returns the exit status;
// the option values it reads live in state that `run` owns.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int(const std::string& command)> run;
};

// Adds the subcommand `name` to `bench` (whose formatter is a BenchFormatter): `summary` in
// tiermem-bench --help, `description` atop its own --help.
inline CLI::App* AddSubcommand(CLI::App& bench, const std::string& name, const std::string& summary,
                               const std::string& description) {
  CLI::App* sub = bench.add_subcommand(name, description);
  if (auto f = std::dynamic_pointer_cast<BenchFormatter>(bench.get_formatter())) f->Summary(sub, summary);
  return sub;
}

}  // namespace tiermem::bench
