#include "base/option_checks.h"

#include <cstring>
#include <strings.h>

namespace tiermem {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Digits [p, end) as a number no larger than `max`; false when empty, not digits, or larger.
bool DigitsUpTo(const char* p, const char* end, uint64_t max, uint64_t* out) {
  if (p == end) return false;
  uint64_t v = 0;
  for (; p != end; ++p) {
    if (!IsDigit(*p)) return false;
    v = v * 10 + static_cast<uint64_t>(*p - '0');
    if (v > max) return false;
  }
  *out = v;
  return true;
}

// "0", "0,2", "0-3,5": what the runtime's node-list parser takes (ParseCpuList), non-empty.
bool IsNodeList(const char* v) {
  if (*v == '\0') return false;
  for (const char* p = v;;) {
    const char* item_end = strchr(p, ',');
    if (item_end == nullptr) item_end = p + strlen(p);
    const char* dash = static_cast<const char*>(memchr(p, '-', static_cast<size_t>(item_end - p)));
    uint64_t a = 0, b = 0;
    if (dash == nullptr) {
      if (!DigitsUpTo(p, item_end, 4095, &a)) return false;
    } else if (!DigitsUpTo(p, dash, 4095, &a) || !DigitsUpTo(dash + 1, item_end, 4095, &b) || b < a) {
      return false;
    }
    if (*item_end == '\0') return true;
    p = item_end + 1;
  }
}

// One memory server, [p, end): an optional tcp:// or rdma:// (lower-cased in place), then
// host[:port] as net::SplitHostPort reads it (the port after the last colon, 1 to 65535).
bool IsEndpoint(char* p, char* end) {
  static const char* kSchemes[] = {"tcp://", "rdma://"};
  for (const char* s : kSchemes) {
    const size_t n = strlen(s);
    if (static_cast<size_t>(end - p) >= n && strncasecmp(p, s, n) == 0) {
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(p[i] | 0x20);
      p += n;
      break;
    }
  }
  for (char* q = p; q + 2 < end; ++q) {
    if (q[0] == ':' && q[1] == '/' && q[2] == '/') return false;  // another scheme
  }
  char* colon = nullptr;
  for (char* q = p; q != end; ++q) {
    if (*q == ':') colon = q;
  }
  if (colon == nullptr) return p != end;
  uint64_t port = 0;
  return colon != p && end - colon <= 6 && DigitsUpTo(colon + 1, end, 65535, &port) && port != 0;
}

}  // namespace

void LowerAscii(char* value) {
  for (char* p = value; *p != '\0'; ++p) {
    if (*p >= 'A' && *p <= 'Z') *p = static_cast<char>(*p - 'A' + 'a');
  }
}

bool ParseAutoCount(const char* text, uint64_t max, bool off, int64_t* out) {
  if (text == nullptr || *text == '\0' || strcasecmp(text, "auto") == 0) {
    *out = -1;
    return true;
  }
  if (off && strcasecmp(text, "off") == 0) {
    *out = 0;
    return true;
  }
  uint64_t n = 0;
  if (!DigitsUpTo(text, text + strlen(text), max, &n)) return false;
  *out = static_cast<int64_t>(n);
  return true;
}

bool SplitCodeShape(const char* text, uint32_t* k, uint32_t* m) {
  const char* plus = strchr(text, '+');
  if (plus == nullptr) return false;
  const char* end = text + strlen(text);
  uint64_t a = 0, b = 0;
  if (plus - text > 2 || end - plus - 1 > 2) return false;
  if (!DigitsUpTo(text, plus, 99, &a) || !DigitsUpTo(plus + 1, end, 99, &b)) return false;
  *k = static_cast<uint32_t>(a);
  *m = static_cast<uint32_t>(b);
  return true;
}

bool CheckDramNodes(char* value) {
  LowerAscii(value);
  return *value == '\0' || strcmp(value, "auto") == 0 || IsNodeList(value);
}

bool CheckCxlNodes(char* value) {
  LowerAscii(value);
  return *value == '\0' || strcmp(value, "auto") == 0 || strcmp(value, "none") == 0 || IsNodeList(value);
}

bool CheckRemote(char* value) {
  if (*value == '\0') return true;
  bool any = false;
  for (char* p = value;;) {
    char* end = strchr(p, ',');
    if (end == nullptr) end = p + strlen(p);
    if (end != p) {
      if (!IsEndpoint(p, end)) return false;
      any = true;
    }
    if (*end == '\0') return any;
    p = end + 1;
  }
}

bool CheckPrefetch(char* value) {
  LowerAscii(value);
  int64_t n = 0;
  return ParseAutoCount(value, kOptMaxPrefetch, true, &n);
}

bool CheckFaultSpin(char* value) {
  LowerAscii(value);
  int64_t n = 0;
  return ParseAutoCount(value, kOptMaxFaultSpinUs, false, &n);
}

bool CheckRemoteCode(char* value) {
  if (*value == '\0') return true;
  uint32_t k = 0, m = 0;
  return SplitCodeShape(value, &k, &m) && (k == 2 || k == 4 || k == 8) && m >= 1 && m <= kOptMaxCodeParity;
}

}  // namespace tiermem
