// Writes one valid message of every type into the directory given, as the fuzzer's seed corpus.
#include <cstdio>
#include <string>
#include <vector>

#include "protocol/protocol.h"

using namespace tiermem::remote::proto;

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  static uint8_t page[kPageSize * 2] = {1, 2, 3};
  Hello hello;
  hello.token = "token";
  std::vector<Body> bodies = {hello, HelloOk{}, Error{6, "bad token"}, Alloc{16}, AllocOk{0, 16, 4096, 7},
                              Free{0, 16}, FreeOk{}, Stats{}, StatsOk{}, Goodbye{}, GoodbyeOk{},
                              Read{3, 2}, ReadOk{page, 2}, Write{3, 1, page}, WriteOk{}, Clients{0}};
  ClientsOk clients;
  clients.capacity_pages = 1024;
  clients.reserved_pages = 512;
  clients.written_pages = 3;
  clients.total = 2;
  clients.entries.resize(2);
  clients.entries[0].session = 1;
  clients.entries[0].slots = 512;
  clients.entries[0].peer = "127.0.0.1:40312";
  clients.entries[1].session = 2;
  clients.entries[1].data_path = DataPath::kRdma;
  clients.entries[1].written_known = 0;
  bodies.push_back(clients);
  bodies.push_back(ReadPart{3, 1024, 1024});
  bodies.push_back(ReadPartOk{page, 1024});
  bodies.push_back(WritePart{3, 3072, 1024, page});
  int n = 0;
  for (const Body& b : bodies) {
    std::vector<uint8_t> buf;
    Encode(uint64_t(n + 1), b, &buf);
    std::string path = std::string(argv[1]) + "/seed-" + std::to_string(n++);
    FILE* f = fopen(path.c_str(), "wb");
    if (f == nullptr) return 1;
    fwrite(buf.data(), 1, buf.size(), f);
    fclose(f);
  }
  return 0;
}
