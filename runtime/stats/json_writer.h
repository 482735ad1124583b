// A small JSON writer for the runtime's own read-outs (stats_json.cc, runtime_counters.cc): no
// JSON library in the runtime, so the preload library stays small. One object or array at a
// time; Key/U/B/S/Histogram write members, Open/Close nest, Raw and Numbers write values.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tiermem::internal {

// A JSON writer for one object: `comma_` says whether the next value or key needs a comma.
class Json {
 public:
  void Key(const char* k) {
    Comma();
    Str(k);
    out_ += ':';
    comma_ = false;
  }
  void U(const char* k, uint64_t v) {
    Key(k);
    char b[32];
    snprintf(b, sizeof(b), "%" PRIu64, v);
    Raw(b);
  }
  void B(const char* k, bool v) {
    Key(k);
    Raw(v ? "true" : "false");
  }
  void S(const char* k, const std::string& v) {
    Key(k);
    Comma();
    Str(v);
    comma_ = true;
  }
  void Open(char c) {
    Comma();
    out_ += c;
    comma_ = false;
  }
  void Close(char c) {
    out_ += c;
    comma_ = true;
  }
  void Raw(const char* v) {
    Comma();
    out_ += v;
    comma_ = true;
  }
  // An array of unsigned numbers, as a value.
  template <typename Seq>
  void Numbers(const Seq& values) {
    Open('[');
    for (uint64_t v : values) {
      char b[32];
      snprintf(b, sizeof(b), "%" PRIu64, v);
      Raw(b);
    }
    Close(']');
  }
  // A histogram member as every read-out writes it: {count, sum_ns, le_ns, buckets}, where
  // buckets[i] counts events of at most le_ns[i] ns and the last bucket the rest.
  template <typename Bounds, typename Buckets>
  void Histogram(const char* k, const Bounds& le_ns, const Buckets& buckets, uint64_t count, uint64_t sum_ns) {
    Key(k);
    Open('{');
    U("count", count);
    U("sum_ns", sum_ns);
    Key("le_ns");
    Numbers(le_ns);
    Key("buckets");
    Numbers(buckets);
    Close('}');
  }
  std::string& str() { return out_; }

 private:
  void Comma() {
    if (comma_) out_ += ',';
  }
  void Str(const std::string& s) {
    out_ += '"';
    for (char c : s) {
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char b[8];
        snprintf(b, sizeof(b), "\\u%04x", c);
        out_ += b;
      } else {
        out_ += c;
      }
    }
    out_ += '"';
  }
  std::string out_;
  bool comma_ = false;
};

}  // namespace tiermem::internal
