// The batch programs of `tiermem-bench programs` (bench/programs.h): sqlite3, liblinear-train,
// GNU sort and g++, each run to its end on inputs generated here (splitmix64: the same bytes on
// every run), each with a check of its own besides the comparison with plain's output.
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/programs.h"
#include "bench/splitmix.h"

namespace tiermem::bench {
namespace {

// Writes `text` to `path`; "" or the error.
std::string WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.flush();
  return f ? "" : "cannot write " + path;
}

// Fails `r`'s own check with `why` (its error stays as it is).
void CheckFails(ProgramResult& r, const std::string& why) {
  r.self_check_ok = false;
  if (r.check_failed.empty()) r.check_failed = why;
}

// ---- sqlite3: an in-memory database ---------------------------------------------------------

std::string SqliteScript(uint64_t rows) {
  std::ostringstream s;
  s << "PRAGMA temp_store=memory;\n"
       "CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, val INTEGER, name TEXT);\n"
       "CREATE TABLE g(grp INTEGER PRIMARY KEY, label TEXT);\n"
       "WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x+1 FROM c WHERE x<" << rows - 1 << ")\n"
       "  INSERT INTO t SELECT x, (x*7919)%5000, (x*2654435761)%1000003,\n"
       "    printf('n%08x-%032d', ((x*40503)%65536)*65536 + x%65536, x) FROM c;\n"
       "WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x+1 FROM c WHERE x<4999)\n"
       "  INSERT INTO g SELECT x, printf('group-%05d', x) FROM c;\n"
       "CREATE INDEX t_val ON t(val);\n"
       "CREATE INDEX t_name ON t(name);\n"
       "SELECT 'rows', count(*) FROM t;\n"
       "SELECT grp, count(*), sum(val), min(name), max(name) FROM t GROUP BY grp ORDER BY grp;\n"
       "SELECT g.label, count(*), sum(t.val) FROM t JOIN g ON t.grp = g.grp WHERE t.val < 500000\n"
       "  GROUP BY g.label ORDER BY 3 DESC, 1 LIMIT 100;\n"
       "SELECT count(*), sum(val) FROM t WHERE name BETWEEN 'n1' AND 'n8';\n"
       "SELECT count(*) FROM t a JOIN t b ON a.val = b.val AND a.id < b.id;\n";
  return s.str();
}

}  // namespace

ProgramJob SqliteJob(bool quick) {
  const uint64_t rows = quick ? 50'000 : 800'000;
  ProgramJob j{"sqlite3", "row", {"sqlite3"}, "", {}, {}};
  j.size = std::to_string(rows) + " rows inserted into an in-memory database, two indexes built, then aggregate "
           "(GROUP BY over 5000 groups), join and range queries; output compared with plain's";
  j.prepare = [rows](const std::string& dir) { return WriteText(dir + "/sqlite.sql", SqliteScript(rows)); };
  j.run = [rows](const PreloadSetup& setup, const std::string& dir, uint64_t deadline_ns) {
    std::string out;
    BatchCommand cmd{{"sqlite3", ":memory:", ".read " + dir + "/sqlite.sql"}, "", {}, static_cast<double>(rows), &out};
    ProgramResult r = RunBatch(setup, dir, cmd, deadline_ns);
    r.self_check_ok = true;
    if (out.rfind("rows|" + std::to_string(rows) + "\n", 0) != 0) CheckFails(r, "the table does not hold every row");
    // One line per group, then the join's 100, the range query's one and the self-join's one.
    const size_t lines = static_cast<size_t>(std::count(out.begin(), out.end(), '\n'));
    if (lines != 1 + 5000 + 100 + 1 + 1) CheckFails(r, "the queries printed " + std::to_string(lines) + " lines");
    const std::string path = dir + "/sqlite.out";
    WriteText(path, out);
    r.result = FileDigest(path);
    return r;
  };
  return j;
}

// ---- liblinear-train: a sparse linear SVM -------------------------------------------------------

namespace {

constexpr uint64_t kLinearFeatures = 100'000;
constexpr int kLinearNonzeros = 40;

// `rows` instances of kLinearNonzeros features each (distinct, increasing indices), labelled by
// the sign of a hidden weight vector's product with them: a set a linear model separates.
std::string LinearData(const std::string& path, uint64_t rows) {
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return "cannot write " + path;
  auto weight = [](uint64_t feature) { return static_cast<double>(SplitMix64(feature) >> 11) / 4503599627370496.0 - 1; };
  uint64_t s = 42;
  std::vector<uint64_t> idx(kLinearNonzeros);
  for (uint64_t i = 0; i < rows; ++i) {
    for (uint64_t& x : idx) x = 1 + SplitMix64Next(&s) % kLinearFeatures;
    std::sort(idx.begin(), idx.end());
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());  // features are listed once each
    double dot = 0;
    std::string line;
    char item[40];
    for (const uint64_t x : idx) {
      const double v = static_cast<double>(SplitMix64Next(&s) % 1000) / 1000.0;
      dot += weight(x) * v;
      snprintf(item, sizeof(item), " %" PRIu64 ":%.3f", x, v);
      line += item;
    }
    fprintf(f, "%s%s\n", dot > 0 ? "+1" : "-1", line.c_str());
    idx.resize(kLinearNonzeros);
  }
  return fclose(f) == 0 ? "" : "cannot write " + path;
}

}  // namespace

ProgramJob LiblinearJob(bool quick) {
  const uint64_t rows = quick ? 10'000 : 250'000;
  ProgramJob j{"liblinear", "instance", {"liblinear-train"}, "", {}, {}};
  j.size = std::to_string(rows) + " instances of " + std::to_string(kLinearNonzeros) + " features out of " +
           std::to_string(kLinearFeatures) + ", linearly separable; liblinear-train -s 2 -e 0.1 (L2-regularised "
           "L2-loss SVM, primal); model file compared with plain's";
  j.prepare = [rows](const std::string& dir) { return LinearData(dir + "/linear.data", rows); };
  j.run = [rows](const PreloadSetup& setup, const std::string& dir, uint64_t deadline_ns) {
    const std::string model = dir + "/linear.model";
    unlink(model.c_str());
    BatchCommand cmd{{"liblinear-train", "-q", "-s", "2", "-e", "0.1", dir + "/linear.data", model}, "", {},
                     static_cast<double>(rows), nullptr};
    ProgramResult r = RunBatch(setup, dir, cmd, deadline_ns);
    // The model: a header naming the solver and the feature count, then "w" and one weight a line.
    std::ifstream f(model);
    std::string line;
    uint64_t features = 0, weights = 0;
    bool in_w = false;
    while (std::getline(f, line)) {
      if (in_w) ++weights;
      if (line.rfind("nr_feature ", 0) == 0) features = std::strtoull(line.c_str() + 11, nullptr, 10);
      if (line == "w") in_w = true;
    }
    r.self_check_ok = true;
    if (features == 0 || weights != features) CheckFails(r, "the model file is incomplete");
    r.result = FileDigest(model);
    return r;
  };
  return j;
}

// ---- GNU sort: a generated file ----------------------------------------------------------------

namespace {

// `lines` lines of a random 16-hex-digit key, the line's number and padding (64 bytes each).
std::string SortInput(const std::string& path, uint64_t lines) {
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return "cannot write " + path;
  uint64_t s = 7;
  for (uint64_t i = 0; i < lines; ++i) {
    fprintf(f, "%016" PRIx64 " %08" PRIu64 " pppppppppppppppppppppppppppppppppppppp\n", SplitMix64Next(&s), i);
  }
  return fclose(f) == 0 ? "" : "cannot write " + path;
}

uint64_t LineHash(const std::string& line) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : line) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return SplitMix64(h);
}

// The lines of `path`: how many, the sum of their hashes (the same for any order of the same
// lines) and whether they are in byte order.
struct Lines {
  uint64_t count = 0, hash_sum = 0;
  bool sorted = true;
};
Lines ReadLines(const std::string& path) {
  Lines out;
  std::ifstream f(path);
  std::string line, prev;
  while (std::getline(f, line)) {
    ++out.count;
    out.hash_sum += LineHash(line);
    if (out.count > 1 && line < prev) out.sorted = false;
    prev.swap(line);
  }
  return out;
}

}  // namespace

ProgramJob SortJob(bool quick) {
  const uint64_t lines = quick ? 100'000 : 2'000'000;
  ProgramJob j{"sort", "line", {"sort"}, "", {}, {}};
  j.size = std::to_string(lines) + " lines of 64 bytes (a random key first) sorted by LC_ALL=C sort -S 1G "
           "--parallel=2; checked: every line once (line count and an order-free sum of line hashes equal the "
           "input's) and in byte order; output compared with plain's";
  j.prepare = [lines](const std::string& dir) { return SortInput(dir + "/sort.in", lines); };
  j.run = [lines](const PreloadSetup& setup, const std::string& dir, uint64_t deadline_ns) {
    const std::string in = dir + "/sort.in", out = dir + "/sort.out";
    unlink(out.c_str());
    BatchCommand cmd{{"sort", "-S", "1G", "--parallel=2", "-o", out, in}, "", {{"LC_ALL", "C"}},
                     static_cast<double>(lines), nullptr};
    ProgramResult r = RunBatch(setup, dir, cmd, deadline_ns);
    const Lines a = ReadLines(in), b = ReadLines(out);
    r.self_check_ok = true;
    if (b.count != a.count || b.hash_sum != a.hash_sum) CheckFails(r, "the output does not hold the input's lines");
    if (!b.sorted) CheckFails(r, "the output is not in order");
    r.result = FileDigest(out);
    unlink(out.c_str());
    return r;
  };
  return j;
}

// ---- g++: a large generated translation unit -------------------------------------------------

namespace {

// Two tables of `entries` random constants each and `functions` functions that index them and
// fill std::maps (templates instantiated, loops optimised at -O2).
std::string GxxSource(uint64_t entries, uint64_t functions, uint64_t* lines) {
  std::string src = "#include <cstdint>\n#include <map>\n#include <string>\n";
  uint64_t s = 11;
  char buf[256];
  for (int t = 0; t < 2; ++t) {
    src += "extern const uint32_t table" + std::to_string(t) + "[];\nconst uint32_t table" + std::to_string(t) + "[] = {\n";
    for (uint64_t i = 0; i < entries; ++i) {
      snprintf(buf, sizeof(buf), "%" PRIu64 "u,%s", SplitMix64Next(&s) >> 33, i % 100 == 99 ? "\n" : "");
      src += buf;
    }
    src += "};\n";
  }
  for (uint64_t i = 0; i < functions; ++i) {
    snprintf(buf, sizeof(buf), "uint64_t f%" PRIu64 "(std::map<int, std::string>& m, uint64_t a) {\n  uint64_t s = %" PRIu64
             ";\n  for (uint64_t k = 0; k < a; ++k) {\n", i, i);
    src += buf;
    for (uint64_t k = 0; k < 4; ++k) {
      snprintf(buf, sizeof(buf), "    s += table%" PRIu64 "[(k * %" PRIu64 "u) %% %" PRIu64 "] ^ (a >> %" PRIu64
               "); m[int(s %% %" PRIu64 ")] += char(s);\n", k % 2, i * 13 + k + 1, entries, k + 1, k + 97);
      src += buf;
    }
    src += "  }\n  return s;\n}\n";
  }
  *lines = static_cast<uint64_t>(std::count(src.begin(), src.end(), '\n'));
  return src;
}

}  // namespace

ProgramJob GxxJob(bool quick) {
  const uint64_t entries = quick ? 20'000 : 300'000, functions = quick ? 5 : 30;
  auto lines = std::make_shared<uint64_t>(0);
  ProgramJob j{"g++", "source line", {"g++"}, "", {}, {}};
  j.size = "g++ -O2 -c of a generated translation unit: two tables of " + std::to_string(entries) +
           " constants and " + std::to_string(functions) + " functions over std::map; object file compared "
           "with plain's (-frandom-seed fixed)";
  j.prepare = [=](const std::string& dir) { return WriteText(dir + "/big.cc", GxxSource(entries, functions, lines.get())); };
  j.run = [=](const PreloadSetup& setup, const std::string& dir, uint64_t deadline_ns) {
    const std::string obj = dir + "/big.o";
    unlink(obj.c_str());
    BatchCommand cmd{{"g++", "-O2", "-c", "-frandom-seed=tiermem", "-o", obj, dir + "/big.cc"}, "", {},
                     static_cast<double>(*lines), nullptr};
    if (setup.name == "tiermem") {
      // Each subprocess (cc1plus, as) writes its statistics to a file of its own.
      cmd.argv.insert(cmd.argv.begin() + 1, {"-wrapper", "/bin/sh,-c,exec env TIERMEM_STATS=\"$TIERMEM_STATS.$$\" \"$0\" \"$@\""});
    }
    ProgramResult r = RunBatch(setup, dir, cmd, deadline_ns);
    std::ifstream f(obj, std::ios::binary);
    char magic[4] = {};
    f.read(magic, 4);
    r.self_check_ok = true;
    if (!f || magic[0] != 0x7f || magic[1] != 'E' || magic[2] != 'L' || magic[3] != 'F') {
      CheckFails(r, "no ELF object was written");
    }
    r.result = FileDigest(obj);
    return r;
  };
  return j;
}

}  // namespace tiermem::bench
