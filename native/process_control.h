// Process-level controls for the launcher and the agent's memory housekeeping.
//
// JS API (registered on the addon's exports):
//   execve(file: string, argv: string[], env: string[]): never
//                 replaces this process image (same pid, same stdio, signals go straight to
//                 the new image); returns only by throwing an Error naming file and errno
//   mallocTrim(): boolean   glibc malloc_trim(0): returns freed heap pages of every arena to
//                 the kernel; true when some memory was released (always false off glibc)
//   mallocInfo(): { arenaBytes, inUseBytes, freeBytes, mmapBytes }  glibc mallinfo2 totals
//                 over all arenas (freeBytes: free chunks malloc holds); {} off glibc >= 2.33
#pragma once
#include <napi.h>

namespace kts {
void InitProcessControl(Napi::Env env, Napi::Object exports);
}  // namespace kts
