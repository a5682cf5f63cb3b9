// eBPF OOM source: loads native/bpf/oom_victim.bpf.c (compiled into the addon when the build
// had clang, bpftool and libbpf headers) with libbpf, dlopen()ed at run time so that an addon
// built with eBPF still loads, and reports why, on a host without libbpf.
#pragma once
#include <string>

#include "bpf/oom_victim.h"

namespace kts {

// False (with the reason) when this build has no eBPF object in it.
bool EbpfCompiledIn(std::string* reason);

class EbpfOomSource {
 public:
  using Callback = void (*)(void* ctx, const kts_oom_victim& victim);

  EbpfOomSource(Callback cb, void* ctx) : cb_(cb), ctx_(ctx) {}
  ~EbpfOomSource() { Stop(); }
  EbpfOomSource(const EbpfOomSource&) = delete;
  EbpfOomSource& operator=(const EbpfOomSource&) = delete;

  // Loads and attaches the program; on failure returns false and says why in *reason
  // (not root, no BTF, lockdown, missing libbpf, ...).
  bool Start(std::string* reason);
  // The ring buffer's epoll fd (readable when records wait), -1 when not started.
  int PollFd() const;
  // Hands every waiting record to the callback; returns how many, or -errno.
  int Consume();
  void Stop();

 private:
  static int OnSample(void* self, void* data, size_t size);

  Callback cb_;
  void* ctx_;
  void* obj_ = nullptr;   // struct bpf_object*
  void* link_ = nullptr;  // struct bpf_link*
  void* rb_ = nullptr;    // struct ring_buffer*
};

}  // namespace kts
