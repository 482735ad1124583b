// The load client of `tiermem-bench memcached`: memcached's text protocol over TCP on loopback.
//
// Keys are numbers 0..keys-1, named "tm:<number>"; each value's length (256..4096 bytes) and
// bytes derive from its key alone, so every value that comes back is checked in full without
// keeping a copy. The fill stores every key once (pipelined sets); the gets then ask 90% of the
// time for one of the hot keys (those whose hash falls in the first tenth: 10% of the keys,
// spread over the whole key space and so over memcached's slab pages) and 10% of the time for
// one of the others, one request outstanding per connection, each timed.
//
// Thread-safety: FillKeys and RunGets start their own threads, one per connection, and return
// when they have ended; each connection is used by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tiermem::bench {

size_t McValueSize(uint64_t key);
// The value of `key`: McValueSize(key) printable bytes.
void McValue(uint64_t key, std::string* out);
// Whether `key` is one of the hot keys (about 10% of them).
bool McHotKey(uint64_t key);

struct McLoad {
  uint16_t port = 0;      // memcached on 127.0.0.1
  uint64_t keys = 0;
  int connections = 4;
  double seconds = 10;    // the gets end after this long, or
  uint64_t max_gets = 0;  // after this many over all connections (0: no count bound)
  uint64_t seed = 1;
};

struct McResult {
  bool ok = false;
  std::string error;      // the first connection or protocol error
  uint64_t requests = 0;  // sets (fill) or gets
  uint64_t misses = 0;    // gets answered "not found"
  uint64_t wrong = 0;     // gets whose value was not the key's
  double seconds = 0;
  double p50_ns = 0, p99_ns = 0;  // per get, round trip
};

// Stores every key once; ok when memcached answered STORED to each.
McResult FillKeys(const McLoad& load);
// The gets, every value checked; ok when no connection failed (misses and wrong values are
// counted, not errors).
McResult RunGets(const McLoad& load);

}  // namespace tiermem::bench
