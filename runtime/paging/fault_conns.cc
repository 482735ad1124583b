// A memory server's fault connections (fault_conns.h).
#include "runtime/paging/fault_conns.h"

#include <algorithm>
#include <utility>

namespace tiermem {

uint32_t FaultConns::For(const remote::Endpoint& ep, uint32_t configured) {
  if (ep.kind == remote::Endpoint::Kind::kRdma) return 1;
  return std::clamp<uint32_t>(configured, 1, kMaxFaultConnections);
}

Status FaultConns::Connect(const remote::Endpoint& ep, const std::string& token, const remote::SessionTicket& ticket,
                           uint32_t timeout_ms, uint32_t configured) {
  const uint32_t want = For(ep, configured);
  remote::SessionTicket join = ticket;
  for (uint32_t c = 0; c < want; ++c) {
    auto made = remote::MakeTransport(ep);
    Status st = made.ok() ? (*made)->Connect(token, timeout_ms, &join) : made.status();
    if (!st.ok()) {
      Drop(false, nullptr);
      return st;
    }
    t[c] = std::move(*made);
    n = c + 1;
  }
  return Status::Ok();
}

void FaultConns::Drop(bool release, std::vector<std::unique_ptr<remote::Transport>>* retired) {
  for (uint32_t c = 0; c < kMaxFaultConnections; ++c) {
    out[c] = 0;
    if (!t[c]) continue;
    if (release) {
      (void)t[c].release();
      continue;
    }
    t[c]->Close();
    if (retired != nullptr) retired->push_back(std::move(t[c]));
    t[c].reset();
  }
  n = 0;
}

void FaultConns::KeepFailed(uint32_t failed) {
  if (failed >= n) return;
  if (failed != 0) std::swap(t[0], t[failed]);
  n = 1;
  std::fill(out, out + kMaxFaultConnections, 0u);
}

}  // namespace tiermem
