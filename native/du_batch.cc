// du/find walks for a batch of paths on the libuv threadpool (see du_batch.h for the JS API).
#include "du_batch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kts {
namespace {

struct Usage {
  double bytes = 0;
  double inodes = 0;
  bool mount = false;
};

struct Request {
  std::string path;
  int split = 0;
};

struct Answer {
  bool found = false;
  Usage usage;
  std::vector<std::pair<std::string, Usage>> children;
  std::string error;
};

/** A failed call: the errno and where, for the answer's message. */
struct WalkError {
  int err;
  const char* call;
  std::string file;
};

bool Gone(int err) { return err == ENOENT || err == ENOTDIR; }

std::string Describe(const WalkError& e) {
  const char* name = strerrorname_np(e.err);
  return std::string(name ? name : "E?") + ": " + std::strerror(e.err) + ", " + e.call + " '" + e.file + "'";
}

struct DevIno {
  dev_t dev;
  ino_t ino;
  bool operator==(const DevIno& o) const { return dev == o.dev && ino == o.ino; }
};
struct DevInoHash {
  size_t operator()(const DevIno& k) const { return std::hash<uint64_t>()(static_cast<uint64_t>(k.ino) * 1000003u ^ static_cast<uint64_t>(k.dev)); }
};

/** Reads a directory's entry names (without . and ..); false with errno on failure. */
bool ListDir(const std::string& dir, std::vector<std::pair<std::string, unsigned char>>* out, int* err) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  DIR* d = ::fdopendir(fd);
  if (!d) {
    *err = errno;
    ::close(fd);
    return false;
  }
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.' && (e->d_name[1] == '\0' || (e->d_name[1] == '.' && e->d_name[2] == '\0'))) continue;
    out->emplace_back(e->d_name, e->d_type);
  }
  *err = errno;
  ::closedir(d);
  return *err == 0;
}

/** Names in the directory open as `fd` (without . and ..); the descriptor stays open. */
bool ListDirFd(int fd, std::vector<std::string>* out, int* err) {
  int d = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (d < 0) {
    *err = errno;
    return false;
  }
  ::lseek(d, 0, SEEK_SET);
  DIR* dir = ::fdopendir(d);
  if (!dir) {
    *err = errno;
    ::close(d);
    return false;
  }
  errno = 0;
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.' && (e->d_name[1] == '\0' || (e->d_name[1] == '.' && e->d_name[2] == '\0'))) continue;
    out->emplace_back(e->d_name);
  }
  *err = errno;
  ::closedir(dir);
  return *err == 0;
}

/**
 * One directory of a walk: its names still to visit, and its descriptor while open. Descriptors
 * beyond kMaxOpenDirs are closed and reopened from the parent's when needed (openat with
 * O_NOFOLLOW, checked against the device and inode first seen), so a deep tree cannot exhaust
 * them and no directory is ever reached through a path string resolved again.
 */
struct Frame {
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string name;
  std::string path;
  std::vector<std::string> names;
  size_t next = 0;
};

constexpr size_t kMaxOpenDirs = 32;

class FrameStack {
 public:
  ~FrameStack() {
    for (auto& f : frames_) Close(&f);
  }
  std::vector<Frame>& frames() { return frames_; }

  /** Frame i's descriptor, reopened from its parent's if it was closed; -1 when it changed or went. */
  int Fd(size_t i) {
    Frame& f = frames_[i];
    if (f.fd >= 0) return f.fd;
    if (i == 0) return -1;
    int parent = Fd(i - 1);
    if (parent < 0) return -1;
    int fd = ::openat(parent, f.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (::fstat(fd, &st) != 0 || st.st_dev != f.dev || st.st_ino != f.ino) {
      ::close(fd);
      return -1;
    }
    Opened(i, fd);
    return fd;
  }

  void Push(Frame f) {
    const int fd = f.fd;
    f.fd = -1;
    frames_.push_back(std::move(f));
    Opened(frames_.size() - 1, fd);
  }

  void Pop() {
    Close(&frames_.back());
    frames_.pop_back();
  }

 private:
  void Opened(size_t i, int fd) {
    frames_[i].fd = fd;
    open_++;
    // the root's and frame i's stay; the others nearest the root close first
    for (size_t k = 1; open_ > kMaxOpenDirs && k < frames_.size(); k++) {
      if (k != i) Close(&frames_[k]);
    }
  }
  void Close(Frame* f) {
    if (f->fd < 0) return;
    ::close(f->fd);
    f->fd = -1;
    open_--;
  }
  std::vector<Frame> frames_;
  size_t open_ = 0;
};

/**
 * du + find of one tree. Returns false when the root does not exist; throws WalkError on failure.
 * Every directory below the root is opened from its parent's descriptor with O_NOFOLLOW and each
 * entry is lstat'ed relative to its directory (fstatat AT_SYMLINK_NOFOLLOW): a directory swapped
 * for a symbolic link during the walk is not followed, at any depth.
 */
bool Walk(const std::string& root, Usage* u) {
  struct stat st;
  if (::lstat(root.c_str(), &st) != 0) {
    if (Gone(errno)) return false;
    throw WalkError{errno, "lstat", root};
  }
  struct stat parent;
  u->mount = ::lstat((root + "/..").c_str(), &parent) == 0 && parent.st_dev != st.st_dev;
  const dev_t dev = st.st_dev;
  std::unordered_set<DevIno, DevInoHash> seen;
  auto count = [&](const struct stat& s) {
    if (s.st_nlink > 1 && !seen.insert(DevIno{s.st_dev, s.st_ino}).second) return;
    u->bytes += static_cast<double>(s.st_blocks) * 512;
    u->inodes += 1;
  };
  count(st);
  if (!S_ISDIR(st.st_mode)) return true;
  int rfd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (rfd < 0) {
    if (Gone(errno) || errno == ELOOP) return true;
    throw WalkError{errno, "open", root};
  }
  struct stat rst;
  if (::fstat(rfd, &rst) != 0 || rst.st_dev != st.st_dev || rst.st_ino != st.st_ino) {
    // replaced between the lstat and the open: what was counted stands
    ::close(rfd);
    return true;
  }
  FrameStack stack;
  {
    Frame f;
    f.fd = rfd;
    f.dev = st.st_dev;
    f.ino = st.st_ino;
    f.path = root;
    int err = 0;
    if (!ListDirFd(rfd, &f.names, &err) && !Gone(err)) {
      ::close(rfd);
      throw WalkError{err, "opendir", root};
    }
    stack.Push(std::move(f));
  }
  auto& frames = stack.frames();
  while (!frames.empty()) {
    const size_t top = frames.size() - 1;
    if (frames[top].next >= frames[top].names.size()) {
      stack.Pop();
      continue;
    }
    const std::string name = frames[top].names[frames[top].next++];
    const int dirfd = stack.Fd(top);
    if (dirfd < 0) {
      // the directory was replaced or removed under the walk: the rest of it is not this tree's
      frames[top].next = frames[top].names.size();
      continue;
    }
    struct stat s;
    if (::fstatat(dirfd, name.c_str(), &s, AT_SYMLINK_NOFOLLOW) != 0) {
      if (Gone(errno)) continue;
      throw WalkError{errno, "lstat", frames[top].path + "/" + name};
    }
    // -x: another filesystem mounted below is not this tree's usage
    if (s.st_dev != dev) continue;
    count(s);
    if (!S_ISDIR(s.st_mode)) continue;
    int cfd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (cfd < 0) {
      if (Gone(errno) || errno == ELOOP) continue;
      throw WalkError{errno, "opendir", frames[top].path + "/" + name};
    }
    struct stat cst;
    if (::fstat(cfd, &cst) != 0 || cst.st_dev != s.st_dev || cst.st_ino != s.st_ino) {
      ::close(cfd);
      continue;
    }
    Frame f;
    f.fd = cfd;
    f.dev = s.st_dev;
    f.ino = s.st_ino;
    f.name = name;
    f.path = frames[top].path + "/" + name;
    int err = 0;
    if (!ListDirFd(cfd, &f.names, &err)) {
      ::close(cfd);
      if (Gone(err)) continue;
      throw WalkError{err, "opendir", f.path};
    }
    stack.Push(std::move(f));
  }
  return true;
}

void Measure(const Request& r, Answer* a) {
  try {
    if (r.split != 2) {
      a->found = Walk(r.path, &a->usage);
      return;
    }
    a->found = true;
    std::vector<std::pair<std::string, unsigned char>> plugins;
    int err = 0;
    if (!ListDir(r.path, &plugins, &err)) {
      if (Gone(err)) {
        a->found = false;
        return;
      }
      throw WalkError{err, "opendir", r.path};
    }
    for (const auto& p : plugins) {
      const std::string pdir = r.path + "/" + p.first;
      if (p.second == DT_UNKNOWN) {
        struct stat s;
        if (::lstat(pdir.c_str(), &s) != 0 || !S_ISDIR(s.st_mode)) continue;
      } else if (p.second != DT_DIR) {
        continue;
      }
      std::vector<std::pair<std::string, unsigned char>> names;
      if (!ListDir(pdir, &names, &err)) {
        if (Gone(err)) continue;
        throw WalkError{err, "opendir", pdir};
      }
      for (const auto& n : names) {
        Usage u;
        if (Walk(pdir + "/" + n.first, &u)) a->children.emplace_back(p.first + "/" + n.first, u);
      }
    }
  } catch (const WalkError& e) {
    a->error = r.path + ": " + Describe(e);
  }
}

Napi::Object UsageObject(Napi::Env env, const Usage& u) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("bytes", Napi::Number::New(env, u.bytes));
  o.Set("inodes", Napi::Number::New(env, u.inodes));
  o.Set("mount", Napi::Boolean::New(env, u.mount));
  return o;
}

class DuBatchWorker : public Napi::AsyncWorker {
 public:
  DuBatchWorker(Napi::Env env, std::vector<Request> reqs)
      : Napi::AsyncWorker(env, "kts.duBatch"), deferred_(Napi::Promise::Deferred::New(env)), reqs_(std::move(reqs)), answers_(reqs_.size()) {}

  Napi::Promise Promise() const { return deferred_.Promise(); }

  void Execute() override {
    for (size_t i = 0; i < reqs_.size(); i++) Measure(reqs_[i], &answers_[i]);
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Napi::Array out = Napi::Array::New(env, answers_.size());
    for (size_t i = 0; i < answers_.size(); i++) {
      const Answer& a = answers_[i];
      Napi::Object o = Napi::Object::New(env);
      if (!a.error.empty()) {
        o.Set("error", Napi::String::New(env, a.error));
      } else if (a.found && reqs_[i].split == 2) {
        Napi::Object children = Napi::Object::New(env);
        for (const auto& c : a.children) children.Set(c.first, UsageObject(env, c.second));
        o.Set("children", children);
      } else if (a.found) {
        o.Set("usage", UsageObject(env, a.usage));
      }
      out.Set(static_cast<uint32_t>(i), o);
    }
    deferred_.Resolve(out);
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  std::vector<Request> reqs_;
  std::vector<Answer> answers_;
};

Napi::Value DuBatch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArray()) {
    throw Napi::TypeError::New(env, "duBatch(requests: { path: string; split?: 0 | 2 }[]): requests must be an array");
  }
  Napi::Array a = info[0].As<Napi::Array>();
  const uint32_t n = a.Length();
  std::vector<Request> reqs(n);
  for (uint32_t i = 0; i < n; i++) {
    const std::string at = "duBatch: requests[" + std::to_string(i) + "]";
    Napi::Value e = a.Get(i);
    if (!e.IsObject()) throw Napi::TypeError::New(env, at + " is not an object");
    Napi::Object o = e.As<Napi::Object>();
    Napi::Value path = o.Get("path");
    if (!path.IsString()) throw Napi::TypeError::New(env, at + ".path is not a string");
    reqs[i].path = path.As<Napi::String>().Utf8Value();
    if (reqs[i].path.empty() || reqs[i].path[0] != '/') throw Napi::TypeError::New(env, at + ".path is not an absolute path");
    if (std::memchr(reqs[i].path.data(), '\0', reqs[i].path.size()) != nullptr) throw Napi::TypeError::New(env, at + ".path contains a NUL byte");
    Napi::Value split = o.Get("split");
    if (!split.IsUndefined()) {
      if (!split.IsNumber() || (split.As<Napi::Number>().Int32Value() != 0 && split.As<Napi::Number>().Int32Value() != 2)) {
        throw Napi::TypeError::New(env, at + ".split is not 0 or 2");
      }
      reqs[i].split = split.As<Napi::Number>().Int32Value();
    }
  }
  auto* worker = new DuBatchWorker(env, std::move(reqs));
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

}  // namespace

void InitDuBatch(Napi::Env env, Napi::Object exports) { exports.Set("duBatch", Napi::Function::New(env, DuBatch, "duBatch")); }

}  // namespace kts
