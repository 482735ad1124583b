#include "base/dynlib.h"

#include <dirent.h>
#include <dlfcn.h>

#include <cstring>
#include <string>

namespace tiermem::os {

DynLib::DynLib(const char* soname, const char* package) : soname_(soname) {
  handle_ = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* err = dlerror();
    status_ = Unavailable(std::string(soname) + " not found: install " + package + " (dlopen: " +
                          (err != nullptr ? err : "unknown error") + ")");
  }
}

void* DynLib::Sym(const char* name) {
  if (handle_ == nullptr) return nullptr;
  dlerror();
  void* p = dlsym(handle_, name);
  if (p == nullptr && status_.ok()) {
    status_ = Unavailable(std::string(soname_) + " has no symbol " + name +
                          " (too old a version?)");
  }
  return p;
}

bool DirHasEntries(const char* path) {
  DIR* dir = opendir(path);
  if (dir == nullptr) return false;
  bool any = false;
  while (dirent* e = readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      any = true;
      break;
    }
  }
  closedir(dir);
  return any;
}

}  // namespace tiermem::os
