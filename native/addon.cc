// Entry point of the kubelet-ts native addon: each feature registers its exports here.
#include <napi.h>

#include "cgroup_reader.h"
#include "du_batch.h"
#include "oom_watcher.h"
#include "process_control.h"
#include "stat_batch.h"
#include "subpath.h"
#include "systemd_units.h"

namespace {

// The addon's ABI level, so the TS loader can refuse a stale build.
constexpr uint32_t kAddonAbi = 1;

Napi::Value AddonAbi(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), kAddonAbi);
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("addonAbi", Napi::Function::New(env, AddonAbi, "addonAbi"));
  kts::InitCgroupReader(env, exports);
  kts::InitOomWatcher(env, exports);
  kts::InitProcessControl(env, exports);
  kts::InitStatBatch(env, exports);
  kts::InitDuBatch(env, exports);
  kts::InitSubpath(env, exports);
  kts::InitSystemdUnits(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(kubelet_ts_native, Init)
