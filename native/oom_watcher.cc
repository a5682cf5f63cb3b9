// N-API binding of the OOM watcher (native/oom/): the OomWatcherHandle class, events as JS
// objects, and the test hooks. The mechanisms live in native/oom/*_backend.cc, the thread in
// native/oom/watcher.cc.
#include "oom_watcher.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "oom/proc_scan.h"
#include "oom/watcher.h"
#include "oom_ebpf.h"

namespace kts {
namespace {

using oom::Event;
using oom::EventKind;
using oom::SourceKind;
using oom::Watcher;

Napi::Value BigNs(Napi::Env env, uint64_t ns) { return Napi::BigInt::New(env, ns); }

Napi::Object ToJs(Napi::Env env, const Event& e) {
  static const long kPageSize = sysconf(_SC_PAGESIZE);
  Napi::Object o = Napi::Object::New(env);
  o.Set("kind", KindName(e.kind));
  o.Set("source", SourceName(e.source));
  o.Set("observedTimeNs", BigNs(env, e.observedNs));
  if (e.hasId) o.Set("id", Napi::Number::New(env, e.id));
  if (e.kind == EventKind::kOomKill || e.kind == EventKind::kOom || e.kind == EventKind::kRemoved) {
    if (e.source != SourceKind::kEbpf) o.Set("total", Napi::Number::New(env, static_cast<double>(e.total)));
  }
  if (e.notifiedNs) o.Set("notifiedTimeNs", BigNs(env, e.notifiedNs));
  if (e.kind == EventKind::kOomKill) o.Set("count", Napi::Number::New(env, static_cast<double>(e.count)));
  if (e.kind == EventKind::kMemoryThreshold) {
    o.Set("count", Napi::Number::New(env, static_cast<double>(e.count)));
    o.Set("thresholdBytes", Napi::BigInt::New(env, e.total));
  }
  if (e.source == SourceKind::kEventfd || e.source == SourceKind::kInotify) {
    if (e.kind == EventKind::kOomKill) {
      Napi::Array arr = Napi::Array::New(env, e.victims.size());
      for (size_t i = 0; i < e.victims.size(); i++) {
        Napi::Object v = Napi::Object::New(env);
        v.Set("pid", Napi::Number::New(env, e.victims[i].pid));
        v.Set("comm", e.victims[i].comm);
        arr.Set(static_cast<uint32_t>(i), v);
      }
      o.Set("victims", arr);
    }
  }
  if (e.hasRecord) {
    const kts_oom_victim& r = e.record;
    auto kb = [](uint64_t pages) { return static_cast<double>(pages) * static_cast<double>(kPageSize) / 1024.0; };
    o.Set("pid", Napi::Number::New(env, r.pid));
    o.Set("tid", Napi::Number::New(env, r.tid));
    o.Set("kernelTimeNs", BigNs(env, r.ktime_ns));
    if (r.flags & KTS_OOM_HAVE_TASK) {
      std::string comm(r.comm, strnlen(r.comm, sizeof(r.comm)));
      o.Set("comm", comm);
      o.Set("uid", Napi::Number::New(env, r.uid));
      o.Set("oomScoreAdj", Napi::Number::New(env, r.oom_score_adj));
    }
    if (r.flags & KTS_OOM_HAVE_MM) {
      o.Set("totalVmKb", Napi::Number::New(env, kb(r.total_vm_pages)));
      o.Set("anonRssKb", Napi::Number::New(env, kb(r.anon_rss_pages)));
      o.Set("fileRssKb", Napi::Number::New(env, kb(r.file_rss_pages)));
      o.Set("shmemRssKb", Napi::Number::New(env, kb(r.shmem_rss_pages)));
      o.Set("swapKb", Napi::Number::New(env, kb(r.swap_ents)));
      o.Set("pgtablesKb", Napi::Number::New(env, static_cast<double>(r.pgtables_bytes) / 1024.0));
    }
    if (r.flags & KTS_OOM_HAVE_MEMCG) {
      o.Set("memcgInode", Napi::Number::New(env, static_cast<double>(r.memcg_ino)));
      o.Set("memcgUsageBytes", Napi::Number::New(env, static_cast<double>(r.memcg_usage_pages) * kPageSize));
      // PAGE_COUNTER_MAX means no limit.
      if (r.memcg_limit_pages < (1ULL << 50)) {
        o.Set("memcgLimitBytes", Napi::Number::New(env, static_cast<double>(r.memcg_limit_pages) * kPageSize));
      }
    }
  }
  if (!e.cgroupPath.empty()) o.Set("cgroupPath", e.cgroupPath);
  if (e.cgroupPathFromProc) o.Set("cgroupPathFromProc", true);
  if (e.kind == EventKind::kKmsg) {
    o.Set("line", e.text);
    o.Set("kernelTimeUs", Napi::Number::New(env, static_cast<double>(e.kernelTimeUs)));
  }
  if (e.kind == EventKind::kMemoryEvents) {
    Napi::Object counters = Napi::Object::New(env);
    Napi::Object deltas = Napi::Object::New(env);
    for (const oom::Counter& c : e.counters) {
      counters.Set(c.name, Napi::Number::New(env, static_cast<double>(c.value)));
      if (c.delta) deltas.Set(c.name, Napi::Number::New(env, static_cast<double>(c.delta)));
    }
    o.Set("counters", counters);
    o.Set("deltas", deltas);
  }
  if (e.kind == EventKind::kMemoryPressure) o.Set("count", Napi::Number::New(env, static_cast<double>(e.count)));
  if (e.kind == EventKind::kError || e.kind == EventKind::kWatchLost) o.Set("message", e.text);
  if (e.fatal) o.Set("fatal", true);
  return o;
}

}  // namespace

namespace oom {

void Watcher::Deliver(Napi::Env env, Napi::Function callback, Delivery* delivery) {
  std::unique_ptr<Delivery> owned(delivery);
  if (env == nullptr || callback.IsEmpty()) return;
  Napi::Array arr = Napi::Array::New(env, owned->events.size());
  for (size_t i = 0; i < owned->events.size(); i++) arr.Set(static_cast<uint32_t>(i), ToJs(env, owned->events[i]));
  try {
    callback.Call({arr});
  } catch (const Napi::Error& err) {
    // A throwing handler must not take the process down: counted, kept, and reported as a
    // process warning (the exception is cleared, not rethrown).
    std::string message = err.Message();
    owned->counters->handlerErrors++;
    {
      std::lock_guard<std::mutex> lock(owned->counters->mu);
      owned->counters->lastHandlerError = message;
    }
    try {
      Napi::Object process = env.Global().Get("process").As<Napi::Object>();
      Napi::Value emit = process.Get("emitWarning");
      if (emit.IsFunction()) {
        emit.As<Napi::Function>().Call(process, {Napi::String::New(env, "OOM watcher event handler threw: " + message),
                                                  Napi::String::New(env, "KubeletOomWatcherWarning")});
      }
    } catch (const Napi::Error&) {
      // Nothing more to report to.
    }
  }
}

}  // namespace oom

namespace {

Napi::Object Result(Napi::Env env, bool ok, const std::string& reason) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("ok", ok);
  if (!ok) o.Set("reason", reason);
  return o;
}

class OomWatcherHandle : public Napi::ObjectWrap<OomWatcherHandle> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "OomWatcherHandle",
                       {
                           InstanceMethod<&OomWatcherHandle::WatchV1>("watchV1"),
                           InstanceMethod<&OomWatcherHandle::WatchV2>("watchV2"),
                           InstanceMethod<&OomWatcherHandle::Unwatch>("unwatch"),
                           InstanceMethod<&OomWatcherHandle::WatchMemoryThreshold>("watchMemoryThreshold"),
                           InstanceMethod<&OomWatcherHandle::UnwatchMemoryThreshold>("unwatchMemoryThreshold"),
                           InstanceMethod<&OomWatcherHandle::WatchMemoryEvents>("watchMemoryEvents"),
                           InstanceMethod<&OomWatcherHandle::UnwatchMemoryEvents>("unwatchMemoryEvents"),
                           InstanceMethod<&OomWatcherHandle::WatchPressure>("watchPressure"),
                           InstanceMethod<&OomWatcherHandle::UnwatchPressure>("unwatchPressure"),
                           InstanceMethod<&OomWatcherHandle::StartEbpf>("startEbpf"),
                           InstanceMethod<&OomWatcherHandle::StopEbpf>("stopEbpf"),
                           InstanceMethod<&OomWatcherHandle::StartKmsg>("startKmsg"),
                           InstanceMethod<&OomWatcherHandle::StopKmsg>("stopKmsg"),
                           InstanceMethod<&OomWatcherHandle::Stats>("stats"),
                           InstanceMethod<&OomWatcherHandle::Ref>("ref"),
                           InstanceMethod<&OomWatcherHandle::Unref>("unref"),
                           InstanceMethod<&OomWatcherHandle::Close>("close"),
                           InstanceMethod<&OomWatcherHandle::TestFailNextPoll>("_testFailNextPoll"),
                       });
  }

  explicit OomWatcherHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<OomWatcherHandle>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsFunction()) {
      Napi::TypeError::New(env, "OomWatcherHandle(onEvents): onEvents must be a function").ThrowAsJavaScriptException();
      return;
    }
    size_t maxQueued = oom::kDefaultMaxQueuedBatches;
    if (info.Length() >= 2 && info[1].IsObject()) {
      Napi::Value v = info[1].As<Napi::Object>().Get("maxQueuedBatches");
      if (v.IsNumber() && v.As<Napi::Number>().Int64Value() > 0) maxQueued = static_cast<size_t>(v.As<Napi::Number>().Int64Value());
    }
    oom::ReapFinished(env);
    // Bounded: a JS thread that falls behind loses the newest batches (counted), not memory.
    auto tsfn = Napi::ThreadSafeFunction::New(env, info[0].As<Napi::Function>(), "kts-oom-watcher", maxQueued, 1);
    core_ = std::make_unique<Watcher>(std::move(tsfn));
    int err = 0;
    if (!core_->Start(&err)) {
      core_->Close();
      Napi::Error::New(env, std::string("oom watcher: cannot start: ") + strerror(err)).ThrowAsJavaScriptException();
      return;
    }
    // Registered after the TSFN, so it runs before the TSFN's own teardown (hooks run in
    // reverse order): the thread is stopped while the TSFN is still valid.
    env_ = env;
    if (napi_add_env_cleanup_hook(env, &OomWatcherHandle::OnEnvCleanup, this) == napi_ok) hooked_ = true;
  }

  // The GC finalizer: never blocks. A watcher still running is told to stop and handed to the
  // reaper, which joins its thread once it has ended (or at env teardown).
  ~OomWatcherHandle() override {
    if (hooked_) napi_remove_env_cleanup_hook(env_, &OomWatcherHandle::OnEnvCleanup, this);
    if (core_ && !core_->closed()) {
      core_->Abandon();
      oom::Adopt(env_, std::move(core_));
    }
  }

 private:
  bool Usable(Napi::Env env) {
    if (!core_ || core_->closed()) {
      Napi::Error::New(env, "oom watcher is closed").ThrowAsJavaScriptException();
      return false;
    }
    return true;
  }

  template <bool (Watcher::*Add)(uint32_t, const std::string&, int*, std::string*)>
  Napi::Value DoWatch(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsString()) {
      Napi::TypeError::New(env, "watch(id: number, dir: string)").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    uint32_t id = info[0].As<Napi::Number>().Uint32Value();
    std::string dir = info[1].As<Napi::String>().Utf8Value();
    int err = 0;
    std::string what;
    if (!((*core_).*Add)(id, dir, &err, &what)) {
      Napi::Error e = Napi::Error::New(env, "oom watch " + dir + ": " + what + ": " + strerror(err));
      e.Set("code", oom::ErrnoName(err));
      e.Set("errno", Napi::Number::New(env, err));
      e.ThrowAsJavaScriptException();
    }
    return env.Undefined();
  }

  Napi::Value WatchV1(const Napi::CallbackInfo& info) { return DoWatch<&Watcher::WatchV1>(info); }
  Napi::Value WatchV2(const Napi::CallbackInfo& info) { return DoWatch<&Watcher::WatchV2>(info); }

  Napi::Value Unwatch(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!core_ || core_->closed() || info.Length() < 1 || !info[0].IsNumber()) return Napi::Boolean::New(env, false);
    return Napi::Boolean::New(env, core_->Unwatch(info[0].As<Napi::Number>().Uint32Value()));
  }

  // watchMemoryThreshold(id, memoryCgroupDir, bytes: bigint | number): v1 usage threshold.
  Napi::Value WatchMemoryThreshold(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint64_t bytes = 0;
    bool lossless = true;
    if (info.Length() >= 3 && info[2].IsBigInt()) {
      bytes = info[2].As<Napi::BigInt>().Uint64Value(&lossless);
    } else if (info.Length() >= 3 && info[2].IsNumber() && info[2].As<Napi::Number>().DoubleValue() >= 0) {
      bytes = static_cast<uint64_t>(info[2].As<Napi::Number>().DoubleValue());
    } else {
      lossless = false;
    }
    if (info.Length() < 3 || !info[0].IsNumber() || !info[1].IsString() || !lossless) {
      Napi::TypeError::New(env, "watchMemoryThreshold(id: number, dir: string, bytes: bigint)").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    uint32_t id = info[0].As<Napi::Number>().Uint32Value();
    std::string dir = info[1].As<Napi::String>().Utf8Value();
    int err = 0;
    std::string what;
    if (!core_->WatchThreshold(id, dir, bytes, &err, &what)) {
      Napi::Error e = Napi::Error::New(env, "memory threshold " + dir + ": " + what + ": " + strerror(err));
      e.Set("code", oom::ErrnoName(err));
      e.Set("errno", Napi::Number::New(env, err));
      e.ThrowAsJavaScriptException();
    }
    return env.Undefined();
  }

  Napi::Value UnwatchMemoryThreshold(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!core_ || core_->closed() || info.Length() < 1 || !info[0].IsNumber()) return Napi::Boolean::New(env, false);
    return Napi::Boolean::New(env, core_->UnwatchThreshold(info[0].As<Napi::Number>().Uint32Value()));
  }

  static void ThrowErrno(Napi::Env env, const std::string& message, int err) {
    Napi::Error e = Napi::Error::New(env, message + ": " + strerror(err));
    e.Set("code", oom::ErrnoName(err));
    e.Set("errno", Napi::Number::New(env, err));
    e.ThrowAsJavaScriptException();
  }

  // watchMemoryEvents(id, file): inotify on a memory.events file; returns the counters read
  // once armed ({} when unreadable).
  Napi::Value WatchMemoryEvents(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsString()) {
      Napi::TypeError::New(env, "watchMemoryEvents(id: number, file: string)").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    std::string file = info[1].As<Napi::String>().Utf8Value();
    std::vector<oom::Counter> initial;
    int err = 0;
    std::string what;
    if (!core_->WatchMemoryEvents(info[0].As<Napi::Number>().Uint32Value(), file, &initial, &err, &what)) {
      ThrowErrno(env, "memory.events watch " + file + ": " + what, err);
      return env.Undefined();
    }
    Napi::Object counters = Napi::Object::New(env);
    for (const oom::Counter& c : initial) counters.Set(c.name, Napi::Number::New(env, static_cast<double>(c.value)));
    return counters;
  }

  Napi::Value UnwatchMemoryEvents(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!core_ || core_->closed() || info.Length() < 1 || !info[0].IsNumber()) return Napi::Boolean::New(env, false);
    return Napi::Boolean::New(env, core_->UnwatchMemoryEvents(info[0].As<Napi::Number>().Uint32Value()));
  }

  // watchPressure(id, file, trigger): a PSI trigger ("some 150000 1000000") on a pressure file.
  Napi::Value WatchPressure(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    if (info.Length() < 3 || !info[0].IsNumber() || !info[1].IsString() || !info[2].IsString()) {
      Napi::TypeError::New(env, "watchPressure(id: number, file: string, trigger: string)").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    std::string file = info[1].As<Napi::String>().Utf8Value();
    std::string trigger = info[2].As<Napi::String>().Utf8Value();
    int err = 0;
    std::string what;
    if (!core_->WatchPressure(info[0].As<Napi::Number>().Uint32Value(), file, trigger, &err, &what)) {
      ThrowErrno(env, "PSI trigger " + file + ": " + what, err);
    }
    return env.Undefined();
  }

  Napi::Value UnwatchPressure(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!core_ || core_->closed() || info.Length() < 1 || !info[0].IsNumber()) return Napi::Boolean::New(env, false);
    return Napi::Boolean::New(env, core_->UnwatchPressure(info[0].As<Napi::Number>().Uint32Value()));
  }

  Napi::Value StartEbpf(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    std::string reason;
    bool ok = core_->StartEbpf(&reason);
    return Result(env, ok, reason);
  }

  Napi::Value StopEbpf(const Napi::CallbackInfo& info) {
    if (core_ && !core_->closed()) core_->StopEbpf();
    return info.Env().Undefined();
  }

  Napi::Value StartKmsg(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    std::string reason;
    bool ok = core_->StartKmsg(&reason);
    return Result(env, ok, reason);
  }

  Napi::Value StopKmsg(const Napi::CallbackInfo& info) {
    if (core_ && !core_->closed()) core_->StopKmsg();
    return info.Env().Undefined();
  }

  Napi::Value Stats(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    oom::FullStats s;
    if (core_ && !core_->closed()) s = core_->GetStats();
    Napi::Object o = Napi::Object::New(env);
    o.Set("watches", Napi::Number::New(env, static_cast<double>(s.watches)));
    o.Set("v1", Napi::Number::New(env, static_cast<double>(s.v1)));
    o.Set("v2", Napi::Number::New(env, static_cast<double>(s.v2)));
    o.Set("fds", Napi::Number::New(env, static_cast<double>(s.fds)));
    o.Set("thresholds", Napi::Number::New(env, static_cast<double>(s.thresholds)));
    o.Set("memoryEvents", Napi::Number::New(env, static_cast<double>(s.memoryEvents)));
    o.Set("psiTriggers", Napi::Number::New(env, static_cast<double>(s.psiTriggers)));
    o.Set("ebpf", s.ebpf);
    o.Set("kmsg", s.kmsg);
    o.Set("running", s.running);
    o.Set("droppedBatches", Napi::Number::New(env, static_cast<double>(s.droppedBatches)));
    o.Set("droppedEvents", Napi::Number::New(env, static_cast<double>(s.droppedEvents)));
    o.Set("handlerErrors", Napi::Number::New(env, static_cast<double>(s.handlerErrors)));
    if (!s.lastHandlerError.empty()) o.Set("lastHandlerError", s.lastHandlerError);
    if (!s.error.empty()) o.Set("error", s.error);
    return o;
  }

  Napi::Value Ref(const Napi::CallbackInfo& info) {
    if (core_ && !core_->closed()) core_->tsfn().Ref(info.Env());
    return info.Env().Undefined();
  }

  Napi::Value Unref(const Napi::CallbackInfo& info) {
    if (core_ && !core_->closed()) core_->tsfn().Unref(info.Env());
    return info.Env().Undefined();
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    if (core_) core_->Close();
    oom::ReapFinished(info.Env());
    return info.Env().Undefined();
  }

  // Test hook: the watcher thread's next epoll_wait fails with this errno.
  Napi::Value TestFailNextPoll(const Napi::CallbackInfo& info) {
    if (core_ && !core_->closed() && info.Length() >= 1 && info[0].IsNumber()) core_->FailNextPoll(info[0].As<Napi::Number>().Int32Value());
    return info.Env().Undefined();
  }

  static void OnEnvCleanup(void* arg) {
    auto* self = static_cast<OomWatcherHandle*>(arg);
    self->hooked_ = false;
    if (self->core_) self->core_->Close();
  }

  std::unique_ptr<Watcher> core_;
  napi_env env_ = nullptr;
  bool hooked_ = false;
};

// Test hooks: hold every scan at its start (so a test can act while one is in progress).
Napi::Value HoldScans(const Napi::CallbackInfo& info) {
  oom::HoldScans(info.Length() >= 1 && info[0].ToBoolean().Value());
  return info.Env().Undefined();
}

Napi::Value ScansInFlight(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), oom::ScansInFlight());
}

Napi::Value OomEbpfBuild(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string reason;
  bool compiled = EbpfCompiledIn(&reason);
  Napi::Object o = Napi::Object::New(env);
  o.Set("compiled", compiled);
  if (!compiled) o.Set("reason", reason);
  return o;
}

}  // namespace

void InitOomWatcher(Napi::Env env, Napi::Object exports) {
  exports.Set("oomEbpfBuild", Napi::Function::New(env, OomEbpfBuild, "oomEbpfBuild"));
  exports.Set("OomWatcherHandle", OomWatcherHandle::Define(env));
  Napi::Object hooks = Napi::Object::New(env);
  hooks.Set("holdScans", Napi::Function::New(env, HoldScans, "holdScans"));
  hooks.Set("scansInFlight", Napi::Function::New(env, ScansInFlight, "scansInFlight"));
  exports.Set("oomTestHooks", hooks);
  // Registered before any handle's TSFN: runs last at teardown, joining collected watchers.
  napi_add_env_cleanup_hook(env, [](void* arg) { oom::ReapAll(static_cast<napi_env>(arg)); }, static_cast<napi_env>(env));
}

}  // namespace kts
