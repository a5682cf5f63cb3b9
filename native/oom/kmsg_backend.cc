#include "kmsg_backend.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace kts {
namespace oom {

struct KmsgBackend::Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

bool KmsgBackend::Start(std::string* reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_) return true;
  auto f = std::make_shared<Fd>();
  f->fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f->fd < 0) {
    *reason = std::string("cannot open /dev/kmsg: ") + strerror(errno);
    return false;
  }
  // Only what the kernel logs from now on.
  lseek(f->fd, 0, SEEK_END);
  if (!poller_->AddFd(this, f->fd, 0)) {
    *reason = std::string("epoll_ctl on /dev/kmsg failed: ") + strerror(errno);
    return false;
  }
  fd_ = std::move(f);
  return true;
}

void KmsgBackend::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!fd_) return;
  poller_->RemoveFd(fd_->fd);
  fd_.reset();
}

void KmsgBackend::OnReadable(uint64_t, Batch* out) {
  std::shared_ptr<Fd> f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    f = fd_;
  }
  if (!f) return;
  char buf[8192];
  for (;;) {
    ssize_t n = read(f->fd, buf, sizeof(buf) - 1);
    if (n < 0) {
      if (errno == EPIPE || errno == EINTR) continue;  // EPIPE: records were overwritten
      break;
    }
    if (n == 0) break;
    std::string_view rec(buf, static_cast<size_t>(n));
    size_t semi = rec.find(';');
    if (semi == std::string_view::npos) continue;
    std::string_view msg = rec.substr(semi + 1);
    size_t nl = msg.find('\n');
    if (nl != std::string_view::npos) msg = msg.substr(0, nl);
    if (msg.find("oom-kill:") == std::string_view::npos && msg.find("Killed process") == std::string_view::npos &&
        msg.find("invoked oom-killer") == std::string_view::npos) {
      continue;
    }
    Event e = NewEvent(EventKind::kKmsg, SourceKind::kKmsg);
    e.text.assign(msg.data(), msg.size());
    // Prefix: priority,sequence,timestamp_us,flags
    std::string_view head = rec.substr(0, semi);
    size_t c1 = head.find(','), c2 = c1 == std::string_view::npos ? c1 : head.find(',', c1 + 1);
    if (c2 != std::string_view::npos) e.kernelTimeUs = strtoull(std::string(head.substr(c2 + 1)).c_str(), nullptr, 10);
    out->push_back(std::move(e));
  }
}

void KmsgBackend::AddStats(WatcherStats* stats) {
  std::lock_guard<std::mutex> lock(mu_);
  stats->kmsg = fd_ != nullptr;
  if (fd_) stats->fds++;
}

}  // namespace oom
}  // namespace kts
