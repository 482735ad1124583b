// The servers file (TIERMEM_REMOTE_FILE): the memory servers of the remote tier, kept in a file
// that operators edit while the process runs (the pager's repair thread reads it again once a
// second). Addresses as TIERMEM_REMOTE takes them ("tcp://host:port", "rdma://host:port",
// "host:port", "host"), separated by commas, spaces or newlines; '#' starts a comment that runs
// to the end of its line. Pure: the pager does the reading.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "backends/remote/transport.h"

namespace tiermem {

struct ServerFileEntries {
  std::vector<remote::Endpoint> servers;  // in file order, each address once
  std::vector<std::string> bad;           // entries that are not an address, with why
};

ServerFileEntries ParseServerFile(std::string_view text);

}  // namespace tiermem
