// The server programs of `tiermem-bench programs` (bench/programs.h): redis-server loaded by
// redis-benchmark, memcached loaded by tiermem's own client (bench/memcached.h). The server runs
// under the setup; its clients run plainly beside it. Speed is requests per second of the load.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "bench/child.h"
#include "bench/compare_util.h"
#include "bench/memcached.h"
#include "bench/programs.h"

namespace tiermem::bench {
namespace {

constexpr int kRedisValueBytes = 1000;

// redis-benchmark's keys ("key:" and 12 digits, __rand_int__), each with the value the load's SETs
// write (1000 bytes of 'x'), so that the data set's digest stays the same through the load.
std::string RedisFill(const std::string& path, uint64_t keys) {
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return "cannot write " + path;
  const std::string value(kRedisValueBytes, 'x');
  for (uint64_t k = 0; k < keys; ++k) {
    fprintf(f, "*3\r\n$3\r\nSET\r\n$16\r\nkey:%012llu\r\n$%d\r\n%s\r\n", static_cast<unsigned long long>(k),
            kRedisValueBytes, value.c_str());
  }
  return fclose(f) == 0 ? "" : "cannot write " + path;
}

// A redis-cli command on the server's socket; its reply, trimmed ("" with `error` set on failure).
std::string RedisCli(const std::string& sock, std::vector<std::string> args, uint64_t deadline_ns, std::string* error) {
  args.insert(args.begin(), {"redis-cli", "-s", sock});
  std::string out;
  if (!RunTool(args, deadline_ns, error, &out)) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// Waits until the server answers PING (it exits, or the deadline passes: false).
bool RedisUp(Child& server, const std::string& sock, uint64_t deadline_ns) {
  std::string err;
  while (NowNs() < deadline_ns) {
    if (access(sock.c_str(), F_OK) == 0 && RedisCli(sock, {"ping"}, deadline_ns, &err) == "PONG") return true;
    if (server.Wait(NowNs()) == Child::Event::kExited) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// A redis-server on `dir`'s socket (and dump.rdb) under `options`.
bool StartRedis(Child& server, ChildOptions o, const std::string& dir, const std::string& sock, uint64_t deadline_ns,
                std::string* error) {
  unlink(sock.c_str());
  o.argv = {"redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
            "--enable-debug-command", "yes", "--dir", dir, "--dbfilename", "dump.rdb"};
  if (!server.Start(o, error)) return false;
  if (!RedisUp(server, sock, deadline_ns)) {
    *error = "redis-server did not answer (" + server.Describe() + ")";
    return false;
  }
  return true;
}

// BGSAVE, waited for; "" when it ended with status ok, else why not.
std::string RedisBgsave(const std::string& sock, uint64_t deadline_ns) {
  std::string err;
  if (RedisCli(sock, {"bgsave"}, deadline_ns, &err).empty()) return "BGSAVE: " + err;
  while (NowNs() < deadline_ns) {
    const std::string info = RedisCli(sock, {"info", "persistence"}, deadline_ns, &err);
    if (info.empty()) return "INFO persistence: " + err;
    if (info.find("rdb_bgsave_in_progress:0") != std::string::npos) {
      return info.find("rdb_last_bgsave_status:ok") != std::string::npos ? "" : "BGSAVE failed";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "BGSAVE timed out";
}

struct RedisSize {
  uint64_t keys, hot_keys, hot_requests, cold_requests;
};

// The load: `requests` GETs (redis-benchmark -t get), then as many SETs of the fill's value (a
// command of redis-benchmark's own: its -t set writes random bytes) over the first `range` keys,
// 4 connections, 16 requests in flight on each.
bool RedisLoad(const std::string& sock, uint64_t range, uint64_t requests, uint64_t deadline_ns, std::string* error) {
  const std::vector<std::string> common = {"redis-benchmark", "-s", sock, "-c", "4", "-P", "16", "-r",
                                           std::to_string(range), "-n", std::to_string(requests), "-q"};
  std::vector<std::string> gets = common, sets = common;
  gets.insert(gets.end(), {"-d", std::to_string(kRedisValueBytes), "-t", "get"});
  sets.insert(sets.end(), {"set", "key:__rand_int__", std::string(kRedisValueBytes, 'x')});
  return RunTool(gets, deadline_ns, error) && RunTool(sets, deadline_ns, error);
}

ProgramResult RunRedis(const PreloadSetup& setup, const std::string& dir, const RedisSize& z, uint64_t deadline_ns) {
  ProgramResult r;
  const std::string sock = dir + "/redis.sock", rdb = dir + "/dump.rdb";
  unlink(rdb.c_str());
  Child server;
  if (!StartRedis(server, setup.options, dir, sock, deadline_ns, &r.error)) return r;
  std::string fill;
  if (!RunTool({"redis-cli", "-s", sock, "--pipe"}, deadline_ns, &r.error, &fill, dir + "/redis.fill")) return r;
  // The checks are not timed, before the load as after it: they get two minutes beyond the
  // deadline, and the load gets back the time they took (DEBUG DIGEST reads every key in hash
  // order, a walk over the whole data set that a DRAM limit makes far slower than the load).
  const uint64_t checked_from = NowNs();
  const uint64_t precheck_ns = std::max(deadline_ns, checked_from) + 120'000'000'000ull;
  const std::string keys = RedisCli(sock, {"dbsize"}, precheck_ns, &r.error);
  const std::string before = RedisCli(sock, {"debug", "digest"}, precheck_ns, &r.error);
  if (before.empty()) return r;
  deadline_ns += NowNs() - checked_from;
  const SetupReading from = ReadSetup(setup, server.pid());
  const uint64_t t0 = NowNs();
  // 90% of the requests on the hot keys (the first tenth), the rest over all of them.
  if (!RedisLoad(sock, z.hot_keys, z.hot_requests, deadline_ns, &r.error) ||
      !RedisLoad(sock, z.keys, z.cold_requests, deadline_ns, &r.error)) {
    return r;
  }
  r.seconds = static_cast<double>(NowNs() - t0) / 1e9;
  r.ops = 2.0 * static_cast<double>(z.hot_requests + z.cold_requests);
  const SetupReading to = ReadSetup(setup, server.pid());
  if (!from.ok || !to.ok) {
    r.error = !from.ok ? from.error : to.error;
    return r;
  }
  r.peak_rss_bytes = to.hwm_bytes;
  r.faults = to.faults - from.faults;
  r.major_faults = to.major_faults - from.major_faults;
  if (setup.name == "tiermem") r.tiermem = TiermemFigures(from, to);
  // The checks are not timed: they get two minutes more than the run's deadline.
  const uint64_t checks_ns = std::max(deadline_ns, NowNs()) + 120'000'000'000ull;
  const std::string after = RedisCli(sock, {"debug", "digest"}, checks_ns, &r.error);
  const std::string saved = RedisBgsave(sock, checks_ns);
  server.Stop(SIGTERM);
  r.result = before;
  r.self_check_ok = true;
  auto check = [&](bool ok, const std::string& why) {
    if (!ok && r.check_failed.empty()) r.check_failed = why;
    r.self_check_ok = r.self_check_ok && ok;
  };
  check(keys == std::to_string(z.keys), "DBSIZE " + keys + " after the fill of " + std::to_string(z.keys) + " keys");
  check(after == before, "DEBUG DIGEST " + after + " after the load, " + before + " before");
  check(saved.empty(), saved);
  if (!saved.empty()) return r;
  // The RDB loaded back by a plain redis-server holds the same data.
  Child loaded;
  std::string err;
  const std::string back = StartRedis(loaded, ChildOptions{}, dir, dir + "/redis-back.sock", checks_ns, &err)
                               ? RedisCli(dir + "/redis-back.sock", {"debug", "digest"}, checks_ns, &err)
                               : "";
  loaded.Stop(SIGTERM);
  check(back == before, "the RDB loaded back with DEBUG DIGEST " + back + (err.empty() ? "" : " (" + err + ")"));
  unlink(rdb.c_str());
  return r;
}

}  // namespace

ProgramJob RedisJob(bool quick) {
  RedisSize z;
  z.keys = quick ? 10'000 : 150'000;
  z.hot_keys = z.keys / 10;
  z.hot_requests = quick ? 45'000 : 216'000;
  z.cold_requests = z.hot_requests / 9;
  ProgramJob j{"redis", "request", {"redis-server", "redis-cli", "redis-benchmark"}, "", {}, {}};
  j.size = std::to_string(z.keys) + " keys of " + std::to_string(kRedisValueBytes) + " bytes (redis-cli --pipe), then " +
           "redis-benchmark -P 16 -c 4, GET then SET of the same value: " + std::to_string(2 * z.hot_requests) + " requests over the first " +
           std::to_string(z.hot_keys) + " keys and " + std::to_string(2 * z.cold_requests) + " over all; checked: "
           "DBSIZE, DEBUG DIGEST equal before and after the load and to plain's, one BGSAVE whose RDB a plain "
           "redis-server loads back with the same digest";
  j.prepare = [z](const std::string& dir) { return RedisFill(dir + "/redis.fill", z.keys); };
  j.run = [z](const PreloadSetup& setup, const std::string& dir, uint64_t deadline_ns) {
    return RunRedis(setup, dir, z, deadline_ns);
  };
  return j;
}

ProgramJob MemcachedJob(bool quick) {
  McServerConfig c;
  c.memcached = "memcached";
  c.load.keys = quick ? 5'000 : 100'000;
  c.load.connections = 4;
  c.load.seconds = quick ? 2 : 4;
  uint64_t data = 0;
  for (uint64_t k = 0; k < c.load.keys; ++k) data += McValueSize(k);
  c.item_mb = McItemMegabytes(data);
  ProgramJob j{"memcached", "get", {"memcached"}, "", {}, {}};
  j.size = std::to_string(c.load.keys) + " keys of 256-4096 bytes stored once, then " +
           std::to_string(static_cast<int>(c.load.seconds)) + " s of gets on 4 connections, 90% on a hot 10% of the "
           "keys (tiermem's client, as tiermem-bench memcached); checked: every value read back equal to its key's "
           "bytes, none missing";
  j.prepare = [](const std::string&) { return std::string(); };
  j.run = [c](const PreloadSetup& setup, const std::string&, uint64_t deadline_ns) {
    McServerConfig cc = c;
    cc.memcached = OnPath("memcached");
    // The gets stop at the deadline at the latest.
    const uint64_t now = NowNs();
    const double left_s = deadline_ns > now ? static_cast<double>(deadline_ns - now) / 1e9 : 0.0;
    cc.load.seconds = std::min(c.load.seconds, std::max(1.0, left_s - 1));
    const nlohmann::json e = RunMemcached(setup, cc);
    ProgramResult r;
    if (e.contains("error")) {
      r.error = e["error"];
      return r;
    }
    r.seconds = e["gets_s"];
    r.ops = e["gets"];
    r.peak_rss_bytes = e["peak_rss_bytes"];
    r.faults = static_cast<uint64_t>(e["faults_per_get"].get<double>() * r.ops + 0.5);
    r.self_check_ok = e["verified"];
    if (!r.self_check_ok) r.check_failed = "values wrong or missing";
    if (e.contains("tiermem_gets")) r.tiermem = e["tiermem_gets"];
    return r;
  };
  return j;
}

}  // namespace tiermem::bench
