// OOM watcher: inotify (cgroup v2), eventfd (cgroup v1) and eBPF sources behind one interface.
#pragma once
#include <napi.h>

namespace kts {
void InitOomWatcher(Napi::Env env, Napi::Object exports);
}
