// Reading an inotify descriptor to empty, shared by the backends that watch files with it
// (the cgroup v2 OOM watcher and the memory.events watcher): which watches changed, which
// the kernel dropped, and whether events were lost.
#pragma once

#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace kts {

struct InotifyChanges {
  std::vector<int> changed;  // watch descriptors modified or closed after writing, each once
  std::vector<int> ignored;  // watches the kernel removed (file or cgroup gone)
  bool overflow = false;     // the queue overflowed: events were lost, re-read everything
};

// Reads the non-blocking inotify `fd` until it is empty.
inline InotifyChanges DrainInotify(int fd) {
  InotifyChanges c;
  alignas(inotify_event) char buf[16384];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      if (ev->mask & IN_IGNORED) {
        c.ignored.push_back(ev->wd);
      } else if (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE)) {
        if (std::find(c.changed.begin(), c.changed.end(), ev->wd) == c.changed.end()) c.changed.push_back(ev->wd);
      } else if (ev->mask & IN_Q_OVERFLOW) {
        c.overflow = true;
      }
      p += sizeof(inotify_event) + ev->len;
    }
  }
  return c;
}

}  // namespace kts
