// Where the pager's slots live: a range of pager slots is a group of memd slots, one on each of
// its members (servers). The pager (pager.h) holds these under the locks each field names.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/remote/transport.h"
#include "runtime/paging/pager_config.h"

namespace tiermem {

// One copy of a range: memd slots on one server.
struct PagerMember {
  size_t server = 0;
  remote::SlotRange memd;
  uint32_t gen = 0;  // the server's session (PagerServer::gen) the slots belong to
};
// A pager slot's places: one memd slot on each member of its range (`offset` into each).
// `join`: a replacement member being filled by the repair thread (written, never read), in
// the place of member `join_of`. With a code, member i keeps piece i of every page of the
// range, the pieces of `per_slot` consecutive pager slots in one memd slot.
struct PagerSlotRef {
  uint32_t n = 0;
  PagerMember m[kMaxMembers];
  bool has_join = false;
  uint32_t join_of = 0;
  PagerMember join;
  uint64_t offset = 0;
  size_t range = 0;  // index in the pager's ranges_
};
// Pager slots are numbered across servers: each range (group) memd hands out gets the next
// `count` pager slots. Records store pager slot + 1 (0 = none). Members and join change only
// with io_mu_ and slots_mu_ held; free, used and the vector's growth need io_mu_ (growth
// slots_mu_ too; a Range never moves).
struct PagerRange {
  uint64_t first = 0;  // first pager slot
  uint64_t count = 0;
  uint32_t n = 0;      // members
  PagerMember m[kMaxMembers];
  bool has_join = false;
  uint32_t join_of = 0;  // the member `join` replaces
  PagerMember join;
  std::vector<uint64_t> free;       // unused pager slots of it; io_mu_
  std::atomic<uint64_t> used{0};    // slots of it in use (written with io_mu_)
};

}  // namespace tiermem
