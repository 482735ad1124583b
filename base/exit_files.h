// Files a process removes when it ends: at a normal exit (an atexit handler installed on first
// use) and on the runtime's own fatal exits (the pager's exit 75 calls RemoveExitFiles before
// _Exit). Fixed storage, no heap: these run when the heap may be gone. Thread-safe.
#pragma once

namespace tiermem {

// Remembers `path` (at most 16 paths of up to 63 characters; more are not remembered).
void AddExitFile(const char* path);
// Forgets `path` without removing it.
void ForgetExitFile(const char* path);
// Forgets every path (a forked child: its parent's files are not its own).
void ForgetAllExitFiles();
// Removes every remembered file now. Async-signal-safe apart from the lock it takes.
void RemoveExitFiles();

}  // namespace tiermem
