// The tiered pass of tiermem-bench remote-fault (remote_fault_pass.h).
#include "bench/remote_fault_pass.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <numeric>
#include <random>
#include <thread>

#include "bench/child.h"
#include "bench/compare_util.h"
#include "tiermem/remote.hpp"
#include "tiermem/tiermem.hpp"

namespace tiermem::bench {
namespace {
using Clock = std::chrono::steady_clock;
constexpr size_t kPage = 4096;

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

constexpr size_t kStride = 4;  // --pattern stride: pages between touches

double CpuSeconds(const std::vector<pid_t>& pids) {
  double sum = 0;
  for (pid_t p : pids) sum += ProcCpuSeconds(p).value_or(0);
  return sum;
}

// Evicts the pass's pages at `base` (Migrate to kRemote): the eviction rate, the CPU time per page
// of this process and of the memds started here, and the server memory held per page.
Status Evict(Runtime& rt, const PassArgs& a, uint8_t* base, Tiered* out) {
  const size_t pages = a.pages;
  const double client_cpu0 = ProcCpuSeconds(getpid()).value_or(0), memd_cpu0 = CpuSeconds(a.memd_pids);
  auto t0 = Clock::now();
  TIERMEM_ASSIGN_OR_RETURN(MigrateResult m, rt.Migrate(base, pages * kPage, Tier::kRemote));
  const double evict_s = std::chrono::duration<double>(Clock::now() - t0).count();
  out->evict_client_cpu_us = (ProcCpuSeconds(getpid()).value_or(0) - client_cpu0) * 1e6 / double(pages);
  out->evict_memd_cpu_us = (CpuSeconds(a.memd_pids) - memd_cpu0) * 1e6 / double(pages);
  if (m.pages_moved != pages) return Internal("eviction: not every page moved");
  const RuntimeCounters c = rt.Counters();
  uint64_t slots = 0;
  for (const auto& srv : c.servers) slots += srv.slots;
  out->server_pages_per_page = double(slots) / double(pages);
  out->evict_rate = double(pages) / evict_s;
  return Status::Ok();
}

// The pages' indices in --pattern's order.
std::vector<size_t> TouchOrder(const std::string& pattern, size_t pages) {
  std::vector<size_t> order;
  order.reserve(pages);
  if (pattern == "stride") {
    for (size_t pass = 0; pass < kStride; ++pass) {
      for (size_t i = pass; i < pages; i += kStride) order.push_back(i);
    }
  } else {
    for (size_t i = 0; i < pages; ++i) order.push_back(i);
    if (pattern == "random") std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  }
  return order;
}

// The touches, split in `threads` interleaved shares of the order (thread t takes every
// threads-th touch from t), each thread timing its own: every touch's microseconds, thread by thread.
std::vector<double> TimedTouches(uint8_t* base, const std::vector<size_t>& order, size_t pages, size_t threads) {
  std::vector<std::vector<double>> lats(threads);
  auto touch = [&](size_t t) {
    lats[t].reserve(pages / threads + 1);
    for (size_t k = t; k < order.size(); k += threads) {
      const size_t i = order[k];
      volatile uint8_t* p = base + i * kPage + (i % 64) * 8;
      auto f0 = Clock::now();
      (void)*p;  // the fault, unless the page was fetched ahead
      lats[t].push_back(Us(Clock::now() - f0));
    }
  };
  if (threads == 1) {
    touch(0);
  } else {
    std::vector<std::thread> th;
    for (size_t t = 0; t < threads; ++t) th.emplace_back(touch, t);
    for (auto& x : th) x.join();
  }
  std::vector<double> lat;
  lat.reserve(pages);
  for (const auto& l : lats) lat.insert(lat.end(), l.begin(), l.end());
  return lat;
}

// The touches' figures: from the counters before and after them, their latencies `lat` and the
// loop's time; and every page checked.
void TouchFigures(const RuntimeCounters& before, const RuntimeCounters& after, const std::vector<double>& lat,
                  double loop_s, const uint8_t* base, size_t pages, Tiered* out) {
  out->faults = after.remote_faults - before.remote_faults;
  out->prefetched = after.pages_prefetched - before.pages_prefetched;
  out->access_gbps = double(pages * kPage) / loop_s / 1e9;
  out->verified = 0;
  for (size_t i = 0; i < pages; ++i) out->verified += CheckPage(base + i * kPage, i) ? 1 : 0;
  out->p50 = Percentile(lat, 0.5);
  out->p99 = Percentile(lat, 0.99);
  out->touch_mean_us = lat.empty() ? 0.0 : std::accumulate(lat.begin(), lat.end(), 0.0) / double(lat.size());
  if (out->faults > 0) {
    out->handler_mean_us = double(after.remote_fault_ns - before.remote_fault_ns) / 1e3 / double(out->faults);
    out->read_mean_us = double(after.remote_fault_read_ns - before.remote_fault_read_ns) / 1e3 / double(out->faults);
    out->handler_waits_per_fault = double(after.fault_handler_waits - before.fault_handler_waits) / double(out->faults);
  }
}

}  // namespace

Status RunTiered(const PassArgs& a, std::vector<std::unique_ptr<MemdChild>>* kill, Tiered* out) {
  const size_t pages = a.pages;
  Options o;
  o.Set("remote", a.url);
  o.Set("token", a.token);
  o.Set("prefetch", a.prefetch);
  o.Set("replicas", static_cast<uint64_t>(a.replicas));
  o.Set("remote_code", a.code);
  TIERMEM_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Start(o));
  if (!rt->HasTier(Tier::kRemote)) return Unavailable(rt->Stats()[2].absent_reason);
  TIERMEM_ASSIGN_OR_RETURN(void* mem, rt->Allocate(pages * kPage, Tier::kDram));
  auto* base = static_cast<uint8_t*>(mem);
  for (size_t i = 0; i < pages; ++i) FillPage(base + i * kPage, i);
  TIERMEM_RETURN_IF_ERROR(Evict(*rt, a, base, out));
  Clock::time_point killed;
  std::thread watcher;
  double repaired_at = 0;
  bool restored = false;
  if (kill != nullptr) {
    const RuntimeCounters c = rt->Counters();
    size_t victim = 0;
    for (size_t k = 1; k < c.servers.size() && k < kill->size(); ++k) {
      if (c.servers[k].pages > c.servers[victim].pages) victim = k;
    }
    (*kill)[victim]->Stop(SIGKILL);
    killed = Clock::now();
  }
  if (kill != nullptr && a.spare) {
    // The repair runs while the touches below fault: a watcher times it on its own, from the
    // kill until no page is short of a replica (at most 60 s).
    watcher = std::thread([&rt, killed, &repaired_at, &restored] {
      for (int i = 0; i < 6000; ++i) {
        const RuntimeCounters now = rt->Counters();
        if (now.remote_servers_down > 0 && now.remote_degraded_pages == 0) {
          repaired_at = std::chrono::duration<double>(Clock::now() - killed).count();
          restored = true;
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }
  const std::vector<size_t> order = TouchOrder(a.pattern, pages);
  const RuntimeCounters before = rt->Counters();
  const auto loop0 = Clock::now();
  const std::vector<double> lat = TimedTouches(base, order, pages, a.threads);
  const double loop_s = std::chrono::duration<double>(Clock::now() - loop0).count();
  RuntimeCounters after = rt->Counters();
  TouchFigures(before, after, lat, loop_s, base, pages, out);
  TIERMEM_ASSIGN_OR_RETURN(out->zero_fault_p50_us, ZeroFaultP50(*rt, std::min<size_t>(pages, 1000)));
  TIERMEM_RETURN_IF_ERROR(MeasureFaultFloors(pages, &out->floor));
  if (watcher.joinable()) {
    // The pages are local now, but their slots (and copies) stay until freed: the repair
    // restores them all the same.
    watcher.join();
    out->rereplication_s = repaired_at;
    out->rebuilt = restored;
    if (!restored) return DeadlineExceeded("replicas not restored within 60 s");
    after = rt->Counters();
  }
  out->servers_lost = after.remote_servers_down;
  out->failovers = after.remote_failovers;
  (void)rt->Free(base);
  return Status::Ok();
}

}  // namespace tiermem::bench
