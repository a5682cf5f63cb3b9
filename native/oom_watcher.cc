#include "oom_watcher.h"

namespace kts {
void InitOomWatcher(Napi::Env env, Napi::Object exports) {}
}  // namespace kts
