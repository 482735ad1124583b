// libFuzzer target for memd's message parser: any byte string must either parse or be refused
// with a Status, never crash, read out of bounds or allocate beyond the input. A message that
// parses must re-encode to bytes that parse to the same type and request id.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "protocol/protocol.h"

using namespace tiermem::remote::proto;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Message m;
  tiermem::Status s = ParseMessage(data, size, &m);
  if (!s.ok()) {
    if (s.message().empty()) abort();  // every refusal says why
    return 0;
  }
  std::vector<uint8_t> again;
  Encode(m.header.request_id, m.body, &again);
  Message m2;
  if (!ParseMessage(again.data(), again.size(), &m2).ok()) abort();
  if (m2.header.type != m.header.type || m2.header.request_id != m.header.request_id) abort();
  if (again.size() != size) abort();  // the encoding is canonical
  // The incremental path memd uses: header first, then the body.
  Header h;
  if (!ParseHeader(data, size, &h).ok()) abort();
  Body b;
  if (!ParseBody(h, data + kHeaderSize, size - kHeaderSize, &b).ok()) abort();
  return 0;
}
