#include <cstdio>
#include <cstring>

#include <tiermem/tiermem.hpp>

int main() {
  auto rt = tiermem::Runtime::Start();
  if (!rt.ok()) {
    std::fprintf(stderr, "consumer: %s\n", rt.status().ToString().c_str());
    return 1;
  }
  auto p = (*rt)->Allocate(1 << 20, tiermem::Tier::kDram);
  if (!p.ok()) return 2;
  std::memset(*p, 1, 1 << 20);
  auto where = (*rt)->Locate(*p, 1 << 20);
  if (!where.ok() || where->size() != 256 || !(*where)[0].resident) return 3;
  if (!(*rt)->Free(*p).ok()) return 4;
  std::printf("consumer ok\n");
  return 0;
}
