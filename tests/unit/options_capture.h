// LoadOptionsFromEnv with stderr captured: the option tests read its warnings.
#pragma once

#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "base/options.h"

namespace tiermem::testing {

inline std::string LoadCapturingWarnings(OptionValues* v) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const int saved = dup(2);
  dup2(fds[1], 2);
  LoadOptionsFromEnv(v);
  dup2(saved, 2);
  close(saved);
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t r;
  while ((r = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(r));
  close(fds[0]);
  return out;
}

}  // namespace tiermem::testing
