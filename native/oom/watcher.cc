#include "watcher.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "proc_scan.h"

namespace kts {
namespace oom {
namespace {

// epoll data: the backend's slot in the top 16 bits, its own key below.
constexpr int kSlotShift = 48;
constexpr uint64_t kKeyMask = (1ULL << kSlotShift) - 1;
constexpr uint64_t kSlotWake = 0;

}  // namespace

Watcher::Watcher(Napi::ThreadSafeFunction tsfn) : tsfn_(std::move(tsfn)) {}

Watcher::~Watcher() {
  // Only reached after Close() or, for an abandoned watcher, once reaped: the thread is done
  // or is being stopped, so this join is short (a scan at most).
  stopping_ = true;
  if (thread_.joinable()) {
    Wake();
    thread_.join();
  }
  ReleaseFds();
}

bool Watcher::Start(int* err) {
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) {
    *err = errno;
    return false;
  }
  wakefd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kSlotWake << kSlotShift;
  if (wakefd_ < 0 || epoll_ctl(epfd_, EPOLL_CTL_ADD, wakefd_, &ev) != 0) {
    *err = errno;
    return false;
  }
  running_ = true;
  thread_ = std::thread([this] { Loop(); });
  return true;
}

void Watcher::Close() {
  if (closed_) return;
  closed_ = true;
  stopping_ = true;
  if (thread_.joinable()) {
    Wake();
    thread_.join();
  }
  ReleaseFds();
  std::lock_guard<std::mutex> lock(postMu_);
  if (!abandoned_) {
    abandoned_ = true;
    tsfn_.Release();
  }
}

void Watcher::Abandon() {
  closed_ = true;
  {
    std::lock_guard<std::mutex> lock(postMu_);
    if (!abandoned_) {
      abandoned_ = true;
      tsfn_.Release();
    }
  }
  stopping_ = true;
  Wake();
}

void Watcher::ReleaseFds() {
  if (fdsReleased_) return;
  fdsReleased_ = true;
  v1_.Close();
  v2_.Close();
  kmsg_.Close();
  ebpf_.Close();
  thresholds_.Close();
  pressure_.Close();
  if (wakefd_ >= 0) close(wakefd_);
  wakefd_ = -1;
  if (epfd_ >= 0) close(epfd_);
  epfd_ = -1;
}

bool Watcher::WatchV1(uint32_t id, const std::string& dir, int* err, std::string* what) {
  v2_.Unwatch(id);  // an id names one watch, whatever its kind
  return v1_.Watch(id, dir, err, what);
}

bool Watcher::WatchV2(uint32_t id, const std::string& dir, int* err, std::string* what) {
  v1_.Unwatch(id);
  return v2_.Watch(id, dir, err, what);
}

bool Watcher::Unwatch(uint32_t id) {
  bool a = v1_.Unwatch(id);
  bool b = v2_.Unwatch(id);
  return a || b;
}

FullStats Watcher::GetStats() {
  FullStats s;
  v1_.AddStats(&s);
  v2_.AddStats(&s);
  kmsg_.AddStats(&s);
  ebpf_.AddStats(&s);
  thresholds_.AddStats(&s);
  pressure_.AddStats(&s);
  s.fds += (epfd_ >= 0) + (wakefd_ >= 0);
  s.running = running_ && !stopping_;
  s.droppedBatches = droppedBatches_;
  s.droppedEvents = droppedEvents_;
  s.handlerErrors = counters_->handlerErrors;
  {
    std::lock_guard<std::mutex> lock(counters_->mu);
    s.lastHandlerError = counters_->lastHandlerError;
  }
  std::lock_guard<std::mutex> lock(errorMu_);
  s.error = error_;
  return s;
}

void Watcher::FailNextPoll(int err) {
  failNextPoll_ = err;
  Wake();
}

bool Watcher::AddFd(Backend* backend, int fd, uint64_t key, bool priority) {
  uint64_t slot = backend == &v1_ ? 1 : backend == &v2_ ? 2 : backend == &kmsg_ ? 3 : backend == &ebpf_ ? 4 : backend == &thresholds_ ? 5 : 6;
  epoll_event ev{};
  ev.events = priority ? EPOLLPRI : EPOLLIN;
  ev.data.u64 = (slot << kSlotShift) | (key & kKeyMask);
  return epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) == 0;
}

void Watcher::RemoveFd(int fd) {
  if (fd >= 0 && epfd_ >= 0) epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
}

void Watcher::Wake() {
  if (wakefd_ < 0) return;
  uint64_t one = 1;
  ssize_t ignored = write(wakefd_, &one, sizeof(one));
  (void)ignored;
}

void Watcher::Loop() {
  // Named so tools and the benchmark can find the watcher's thread in /proc/<pid>/task.
  pthread_setname_np(pthread_self(), "kts-oom-watch");
  Backend* slots[] = {nullptr, &v1_, &v2_, &kmsg_, &ebpf_, &thresholds_, &pressure_};
  epoll_event evs[64];
  while (!stopping_) {
    int timeout = -1;
    uint64_t next = v1_.NextDeadlineNs();
    if (next != UINT64_MAX) {
      uint64_t now = MonoNs();
      timeout = next <= now ? 0 : static_cast<int>(std::min<uint64_t>((next - now + 999999) / 1000000, 60000));
    }
    int n;
    int injected = failNextPoll_.exchange(0);
    if (injected != 0) {
      n = -1;
      errno = injected;
    } else {
      n = epoll_wait(epfd_, evs, 64, timeout);
    }
    if (n < 0) {
      if (errno == EINTR) continue;  // a signal, not a failure: wait again
      Fatal(std::string("epoll_wait: ") + strerror(errno));
      break;
    }
    Batch batch;
    for (int i = 0; i < n; i++) {
      uint64_t slot = evs[i].data.u64 >> kSlotShift;
      if (slot == kSlotWake) {
        uint64_t v;
        ssize_t ignored = read(wakefd_, &v, sizeof(v));
        (void)ignored;
      } else if (slot < sizeof(slots) / sizeof(slots[0])) {
        slots[slot]->OnEvents(evs[i].data.u64 & kKeyMask, evs[i].events, &batch);
      }
    }
    v1_.OnDeadline(MonoNs(), &batch);
    if (!batch.empty()) Post(std::move(batch));
  }
  running_ = false;
  finished_ = true;
}

void Watcher::Fatal(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    error_ = message;
  }
  running_ = false;
  Event e = NewEvent(EventKind::kError, SourceKind::kWatcher);
  e.fatal = true;
  e.text = "oom watcher thread stopped: " + message;
  Batch batch;
  batch.push_back(std::move(e));
  Post(std::move(batch));
}

void Watcher::Post(Batch batch) {
  std::lock_guard<std::mutex> lock(postMu_);
  if (abandoned_) return;
  size_t n = batch.size();
  auto* d = new Delivery{std::move(batch), counters_};
  napi_status st = tsfn_.NonBlockingCall(d, &Watcher::Deliver);
  if (st == napi_ok) return;
  delete d;
  if (st == napi_queue_full) {
    droppedBatches_++;
    droppedEvents_ += n;
  }
}

namespace {
std::mutex g_reapMu;
std::vector<std::pair<napi_env, std::unique_ptr<Watcher>>> g_abandoned;
}  // namespace

void Adopt(napi_env env, std::unique_ptr<Watcher> watcher) {
  std::lock_guard<std::mutex> lock(g_reapMu);
  g_abandoned.emplace_back(env, std::move(watcher));
}

void ReapFinished(napi_env env) {
  std::vector<std::unique_ptr<Watcher>> done;
  {
    std::lock_guard<std::mutex> lock(g_reapMu);
    for (auto it = g_abandoned.begin(); it != g_abandoned.end();) {
      if (it->first == env && it->second->finished()) {
        done.push_back(std::move(it->second));
        it = g_abandoned.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Destroyed outside the lock: their threads have ended, the joins return at once.
}

void ReapAll(napi_env env) {
  std::vector<std::unique_ptr<Watcher>> all;
  {
    std::lock_guard<std::mutex> lock(g_reapMu);
    for (auto it = g_abandoned.begin(); it != g_abandoned.end();) {
      if (it->first == env) {
        all.push_back(std::move(it->second));
        it = g_abandoned.erase(it);
      } else {
        ++it;
      }
    }
  }
}

}  // namespace oom
}  // namespace kts
