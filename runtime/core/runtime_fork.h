// fork() support for the runtime: every live Runtime::Impl is registered, and handlers installed
// once with os::AtFork call its PrepareFork/AfterFork (see runtime_impl.h).
#pragma once

#include "tiermem/tiermem.hpp"

namespace tiermem::internal {

void RegisterLiveRuntime(Runtime::Impl* rt);    // after the runtime is running
void UnregisterLiveRuntime(Runtime::Impl* rt);  // from its destructor

}  // namespace tiermem::internal
