// The OOM watcher: one thread in epoll_wait over every backend's fds, handing batches of
// events to JS through one thread-safe function with a bounded queue.
#pragma once
#include <napi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backend.h"
#include "ebpf_backend.h"
#include "eventfd_backend.h"
#include "inotify_backend.h"
#include "kmsg_backend.h"
#include "pressure_backend.h"
#include "threshold_backend.h"

namespace kts {
namespace oom {

// Batches waiting for the JS thread; beyond this the newest are dropped and counted (as the
// kubelet's PLEG discards events when its channel is full).
constexpr size_t kDefaultMaxQueuedBatches = 256;

// Counters the JS-thread side (delivery) shares with the watcher; outlives either.
struct DeliveryCounters {
  std::atomic<uint64_t> handlerErrors{0};
  std::mutex mu;
  std::string lastHandlerError;
};

struct FullStats : WatcherStats {
  uint64_t droppedBatches = 0, droppedEvents = 0, handlerErrors = 0;
  std::string error, lastHandlerError;
};

struct Delivery;

class Watcher : public Poller {
 public:
  explicit Watcher(Napi::ThreadSafeFunction tsfn);
  ~Watcher() override;

  // Creates the epoll and wake fds and starts the thread; false with errno on failure.
  bool Start(int* err);
  // JS thread: stops and joins the thread, then releases every fd and the TSFN. Idempotent.
  void Close();
  // From a GC finalizer: asks the thread to stop and lets go of the TSFN without waiting;
  // the thread's fds go when the thread has ended and the watcher is reaped (Reap*).
  void Abandon();
  bool closed() const { return closed_; }
  bool finished() const { return finished_; }

  bool WatchV1(uint32_t id, const std::string& dir, int* err, std::string* what);
  bool WatchV2(uint32_t id, const std::string& dir, int* err, std::string* what);
  bool Unwatch(uint32_t id);
  bool WatchThreshold(uint32_t id, const std::string& dir, uint64_t bytes, int* err, std::string* what) {
    return thresholds_.Watch(id, dir, bytes, err, what);
  }
  bool UnwatchThreshold(uint32_t id) { return thresholds_.Unwatch(id); }
  bool WatchMemoryEvents(uint32_t id, const std::string& file, std::vector<Counter>* initial, int* err, std::string* what) {
    return pressure_.WatchEvents(id, file, initial, err, what);
  }
  bool UnwatchMemoryEvents(uint32_t id) { return pressure_.UnwatchEvents(id); }
  bool WatchPressure(uint32_t id, const std::string& file, const std::string& trigger, int* err, std::string* what) {
    return pressure_.WatchPsi(id, file, trigger, err, what);
  }
  bool UnwatchPressure(uint32_t id) { return pressure_.UnwatchPsi(id); }
  bool StartEbpf(std::string* reason) { return ebpf_.Start(reason); }
  void StopEbpf() { ebpf_.Stop(); }
  bool StartKmsg(std::string* reason) { return kmsg_.Start(reason); }
  void StopKmsg() { kmsg_.Stop(); }
  FullStats GetStats();
  Napi::ThreadSafeFunction& tsfn() { return tsfn_; }

  // Test hook: the thread's next epoll_wait fails with err.
  void FailNextPoll(int err);

  bool AddFd(Backend* backend, int fd, uint64_t key, bool priority = false) override;
  void RemoveFd(int fd) override;
  void Wake() override;

  static void Deliver(Napi::Env env, Napi::Function callback, Delivery* delivery);

 private:
  void Loop();
  void Post(Batch batch);
  void Fatal(const std::string& message);
  void ReleaseFds();

  Napi::ThreadSafeFunction tsfn_;
  std::shared_ptr<DeliveryCounters> counters_ = std::make_shared<DeliveryCounters>();
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> running_{false};
  std::atomic<bool> finished_{false};
  std::atomic<int> failNextPoll_{0};
  bool closed_ = false;
  bool fdsReleased_ = false;
  int epfd_ = -1;
  int wakefd_ = -1;
  // Guards posting against Abandon(): once abandoned, the TSFN is not touched again.
  std::mutex postMu_;
  bool abandoned_ = false;
  std::atomic<uint64_t> droppedBatches_{0}, droppedEvents_{0};
  std::mutex errorMu_;
  std::string error_;

  EventfdBackend v1_{this};
  InotifyBackend v2_{this};
  KmsgBackend kmsg_{this};
  EbpfBackend ebpf_{this};
  ThresholdBackend thresholds_{this};
  PressureBackend pressure_{this};
};

struct Delivery {
  Batch events;
  std::shared_ptr<DeliveryCounters> counters;
};

// Watchers whose handle was collected while their thread still ran: joined once finished
// (ReapFinished, never blocking) and, at env teardown, whatever is left (ReapAll).
void Adopt(napi_env env, std::unique_ptr<Watcher> watcher);
void ReapFinished(napi_env env);
void ReapAll(napi_env env);

}  // namespace oom
}  // namespace kts
