#include "kmsg_backend.h"

#include "kmsg_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
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
    Event e = NewEvent(EventKind::kKmsg, SourceKind::kKmsg);
    if (!ParseKmsgOomRecord(std::string_view(buf, static_cast<size_t>(n)), &e.text, &e.kernelTimeUs)) continue;
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
