#include "oom_ebpf.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>

#ifndef KTS_HAVE_EBPF
#define KTS_HAVE_EBPF 0
#endif

#if KTS_HAVE_EBPF
#include "oom_victim_bpf_obj.h"
// The BPF object did not compile (build-bpf.mjs said why): the addon goes without eBPF.
#ifdef KTS_BPF_OBJECT_FAILED
#undef KTS_HAVE_EBPF
#define KTS_HAVE_EBPF 0
#define KTS_EBPF_UNAVAILABLE_REASON KTS_BPF_OBJECT_FAILED
#endif
#endif

#if KTS_HAVE_EBPF
#include <bpf/libbpf.h>
#include <dlfcn.h>
#endif

namespace kts {

#if !KTS_HAVE_EBPF

#ifndef KTS_EBPF_UNAVAILABLE_REASON
#define KTS_EBPF_UNAVAILABLE_REASON "built without eBPF support"
#endif

bool EbpfCompiledIn(std::string* reason) {
  if (reason) *reason = std::string("eBPF source not built: ") + KTS_EBPF_UNAVAILABLE_REASON;
  return false;
}
bool EbpfOomSource::Start(std::string* reason) { return EbpfCompiledIn(reason); }
int EbpfOomSource::PollFd() const { return -1; }
int EbpfOomSource::Consume() { return 0; }
void EbpfOomSource::Stop() {}
int EbpfOomSource::OnSample(void*, void*, size_t) { return 0; }

#else  // KTS_HAVE_EBPF

namespace {

// The libbpf entry points the loader uses, resolved with dlsym.
struct LibBpf {
  decltype(&libbpf_set_print) set_print = nullptr;
  decltype(&bpf_object__open_mem) open_mem = nullptr;
  decltype(&bpf_object__load) load = nullptr;
  decltype(&bpf_object__find_program_by_name) find_program = nullptr;
  decltype(&bpf_program__attach) attach = nullptr;
  decltype(&bpf_object__find_map_fd_by_name) map_fd = nullptr;
  decltype(&ring_buffer__new) rb_new = nullptr;
  decltype(&ring_buffer__epoll_fd) rb_epoll_fd = nullptr;
  decltype(&ring_buffer__consume) rb_consume = nullptr;
  decltype(&ring_buffer__free) rb_free = nullptr;
  decltype(&bpf_link__destroy) link_destroy = nullptr;
  decltype(&bpf_object__close) object_close = nullptr;
  std::string error;  // why it could not be loaded
};

const LibBpf& Lib() {
  static LibBpf lib;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = nullptr;
    std::string tried;
    for (const char* name : {"libbpf.so.1", "libbpf.so.0", "libbpf.so"}) {
      h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (h) break;
      const char* e = dlerror();
      if (tried.empty() && e) tried = e;
    }
    if (!h) {
      lib.error = "missing libbpf (" + tried + ")";
      return;
    }
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && ok) {
        ok = false;
        lib.error = std::string("libbpf too old: no ") + name;
      }
    };
    sym(lib.set_print, "libbpf_set_print");
    sym(lib.open_mem, "bpf_object__open_mem");
    sym(lib.load, "bpf_object__load");
    sym(lib.find_program, "bpf_object__find_program_by_name");
    sym(lib.attach, "bpf_program__attach");
    sym(lib.map_fd, "bpf_object__find_map_fd_by_name");
    sym(lib.rb_new, "ring_buffer__new");
    sym(lib.rb_epoll_fd, "ring_buffer__epoll_fd");
    sym(lib.rb_consume, "ring_buffer__consume");
    sym(lib.rb_free, "ring_buffer__free");
    sym(lib.link_destroy, "bpf_link__destroy");
    sym(lib.object_close, "bpf_object__close");
    // libbpf 0.x returns errors as encoded pointers unless strict mode is on.
    using StrictFn = int (*)(int);
    if (auto strict = reinterpret_cast<StrictFn>(dlsym(h, "libbpf_set_strict_mode"))) strict(~0);
  });
  return lib;
}

// libbpf's own messages during a load, to name the cause of a failure.
std::mutex g_print_mu;
std::string g_print_log;

int CapturePrint(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char buf[512];
  int n = vsnprintf(buf, sizeof(buf), fmt, args);
  std::lock_guard<std::mutex> lock(g_print_mu);
  if (g_print_log.size() < 4096 && n > 0) g_print_log.append(buf);
  return 0;
}

bool IsErrPtr(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) >= static_cast<uintptr_t>(-4095); }

int ErrOf(const void* p) {
  if (p != nullptr && IsErrPtr(p)) return -static_cast<int>(reinterpret_cast<intptr_t>(p));
  return errno ? errno : EINVAL;
}

std::string ReadFirstLine(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[256];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return "";
  buf[n] = 0;
  std::string s(buf);
  auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

// Effective capability bit from /proc/self/status (CapEff).
bool HasCap(int bit) {
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  const char* p = strstr(buf, "CapEff:");
  if (!p) return false;
  unsigned long long caps = strtoull(p + 7, nullptr, 16);
  return (caps >> bit) & 1ULL;
}

// Why a load or attach failed with errno err: the likely cause first, then the detail.
std::string ExplainFailure(const char* step, int err) {
  std::string why;
  constexpr int kCapSysAdmin = 21, kCapPerfmon = 38, kCapBpf = 39;
  bool privileged = HasCap(kCapSysAdmin) || (HasCap(kCapBpf) && HasCap(kCapPerfmon));
  std::string lockdown = ReadFirstLine("/sys/kernel/security/lockdown");
  if ((err == EPERM || err == EACCES) && !privileged) {
    why = geteuid() != 0 ? "not root (needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)"
                         : "missing CAP_BPF/CAP_PERFMON (or CAP_SYS_ADMIN)";
  } else if ((err == EPERM || err == EACCES) && lockdown.find("[confidentiality]") != std::string::npos) {
    why = "kernel lockdown (confidentiality) forbids reading kernel memory from BPF";
  } else {
    why = std::string(step) + " failed: " + strerror(err);
  }
  std::string log;
  {
    std::lock_guard<std::mutex> lock(g_print_mu);
    log.swap(g_print_log);
  }
  // The last libbpf line is usually the most specific one.
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  auto nl = log.rfind('\n');
  std::string last = nl == std::string::npos ? log : log.substr(nl + 1);
  if (!last.empty()) why += " (libbpf: " + last + ")";
  return why;
}

}  // namespace

bool EbpfCompiledIn(std::string* reason) {
  if (reason) reason->clear();
  return true;
}

bool EbpfOomSource::Start(std::string* reason) {
  if (rb_) return true;
  const LibBpf& lib = Lib();
  if (!lib.error.empty()) {
    *reason = lib.error;
    return false;
  }
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
    *reason = "no BTF: /sys/kernel/btf/vmlinux is missing (kernel built without CONFIG_DEBUG_INFO_BTF)";
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(g_print_mu);
    g_print_log.clear();
  }
  lib.set_print(CapturePrint);
  errno = 0;
  auto* obj = lib.open_mem(kOomVictimBpfObject, kOomVictimBpfObjectSize, nullptr);
  if (IsErrPtr(obj)) {
    *reason = ExplainFailure("BPF object open", ErrOf(obj));
    return false;
  }
  int err = lib.load(obj);
  if (err) {
    *reason = ExplainFailure("BPF program load", -err);
    lib.object_close(obj);
    return false;
  }
  auto* prog = lib.find_program(obj, "oom_mark_victim");
  errno = 0;
  auto* link = prog ? lib.attach(prog) : nullptr;
  if (IsErrPtr(link)) {
    *reason = ExplainFailure("attach to raw tracepoint oom/mark_victim", prog ? ErrOf(link) : ENOENT);
    lib.object_close(obj);
    return false;
  }
  int map = lib.map_fd(obj, "events");
  errno = 0;
  auto* rb = map >= 0 ? lib.rb_new(map, reinterpret_cast<ring_buffer_sample_fn>(&EbpfOomSource::OnSample), this, nullptr) : nullptr;
  if (IsErrPtr(rb)) {
    *reason = ExplainFailure("ring buffer setup", map >= 0 ? ErrOf(rb) : -map);
    lib.link_destroy(link);
    lib.object_close(obj);
    return false;
  }
  obj_ = obj;
  link_ = link;
  rb_ = rb;
  return true;
}

int EbpfOomSource::PollFd() const {
  return rb_ ? Lib().rb_epoll_fd(static_cast<ring_buffer*>(rb_)) : -1;
}

int EbpfOomSource::Consume() {
  return rb_ ? Lib().rb_consume(static_cast<ring_buffer*>(rb_)) : 0;
}

void EbpfOomSource::Stop() {
  if (!rb_ && !link_ && !obj_) return;
  const LibBpf& lib = Lib();
  if (rb_) lib.rb_free(static_cast<ring_buffer*>(rb_));
  if (link_) lib.link_destroy(static_cast<bpf_link*>(link_));
  if (obj_) lib.object_close(static_cast<bpf_object*>(obj_));
  rb_ = link_ = obj_ = nullptr;
}

int EbpfOomSource::OnSample(void* self, void* data, size_t size) {
  auto* src = static_cast<EbpfOomSource*>(self);
  if (size < sizeof(kts_oom_victim)) return 0;
  kts_oom_victim v;
  memcpy(&v, data, sizeof(v));
  src->cb_(src->ctx_, v);
  return 0;
}

#endif  // KTS_HAVE_EBPF

}  // namespace kts
