// Loading optional system libraries at run time (dlopen/dlsym) instead of linking them, so a
// process that never needs them (no CXL device, no verbs device: most machines) never maps them.
//
// Each user keeps a table of function pointers per library, filled once (std::call_once) by
// TIERMEM_DYNLIB_RESOLVE from a DynLib; a missing library or symbol becomes a Status with text
// such as "libcxl.so.1 not found: install libcxl1 (...)".
#pragma once

#include <mutex>

#include "tiermem/status.hpp"

namespace tiermem::os {

class DynLib {
 public:
  // dlopen(soname, RTLD_NOW | RTLD_LOCAL). `package` names the distribution package that provides
  // it, for the error text. The handle is never closed (the library stays for the process).
  DynLib(const char* soname, const char* package);
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // dlsym; on a missing symbol records the first one in status() and returns nullptr.
  void* Sym(const char* name);

 private:
  const char* soname_;
  void* handle_ = nullptr;
  Status status_;
};

// The table `Table` (which has a `Status status` member), filled by `Fill` from the library on the
// first call, once and thread-safe; later calls return the same table. Never freed: the tables
// outlive static destructors (a preloaded allocator may still run then).
template <class Table, void (*Fill)(DynLib&, Table*)>
const Table& LoadOnce(const char* soname, const char* package) {
  static std::once_flag once;
  static Table* table = nullptr;
  std::call_once(once, [&] {
    auto* t = new Table;
    DynLib lib(soname, package);
    Fill(lib, t);
    t->status = lib.status();
    table = t;
  });
  return *table;
}

// Whether a directory (a sysfs bus or class) exists and has at least one entry besides . and ..
bool DirHasEntries(const char* path);

}  // namespace tiermem::os

// Fills `table.member` from `lib` with the symbol `prefix##member` (casts to the member's type).
#define TIERMEM_DYNLIB_RESOLVE(lib, table, prefix, member) \
  (table).member = reinterpret_cast<decltype((table).member)>((lib).Sym(#prefix #member))
