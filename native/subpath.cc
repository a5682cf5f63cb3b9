// Safe subPath open, bind mount and cleanup on the libuv threadpool (see subpath.h for the JS API).
#include "subpath.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif
#ifndef UMOUNT_NOFOLLOW
#define UMOUNT_NOFOLLOW 0x00000008
#endif

namespace kts {
namespace {

constexpr const char* kSubpathDir = "volume-subpaths";
// openat2(2)'s struct open_how and resolve flags (linux/openat2.h is not on every build host).
struct OpenHow {
  uint64_t flags;
  uint64_t mode;
  uint64_t resolve;
};
constexpr uint64_t kResolveNoMagicLinks = 0x02;
constexpr uint64_t kResolveNoSymlinks = 0x04;
constexpr uint64_t kResolveBeneath = 0x08;

/** A failed step: errno, which phase of the work, and a message naming the call and path. */
struct SubpathError {
  int err;
  std::string phase;
  std::string message;
};

[[noreturn]] void Fail(int err, const char* phase, const std::string& what, const std::string& path) {
  throw SubpathError{err, phase, what + " '" + path + "': " + std::strerror(err)};
}

std::string ErrName(int err) {
  const char* n = strerrorname_np(err);
  return n ? n : "E" + std::to_string(err);
}

/** An owned descriptor. */
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

bool Within(const std::string& base, const std::string& p) {
  if (base == "/") return !p.empty() && p[0] == '/';
  return p == base || (p.size() > base.size() && p.compare(0, base.size(), base) == 0 && p[base.size()] == '/');
}

/** The components of a relative path; "" and "." dropped; ".." refused (the API refuses it too). */
std::vector<std::string> Split(const std::string& rel, const char* phase) {
  if (!rel.empty() && rel[0] == '/') Fail(EINVAL, phase, "subPath must be a relative path", rel);
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= rel.size()) {
    size_t j = rel.find('/', i);
    if (j == std::string::npos) j = rel.size();
    std::string seg = rel.substr(i, j - i);
    if (seg == "..") Fail(EINVAL, phase, "subPath must not contain '..'", rel);
    if (!seg.empty() && seg != ".") out.push_back(std::move(seg));
    i = j + 1;
  }
  return out;
}

/** What follows rootReal in real (a path within it), without the leading slash. */
std::string Below(const std::string& rootReal, const std::string& real) {
  std::string rest = rootReal == "/" ? real.substr(1) : real.substr(rootReal.size());
  return !rest.empty() && rest[0] == '/' ? rest.substr(1) : rest;
}

std::string Join(const std::string& base, const std::vector<std::string>& segs, size_t n) {
  std::string p = base;
  for (size_t i = 0; i < n && i < segs.size(); i++) {
    if (p.empty() || p.back() != '/') p += '/';
    p += segs[i];
  }
  return p;
}

bool RealPath(const std::string& p, std::string* out, int* err) {
  char* r = ::realpath(p.c_str(), nullptr);
  if (!r) {
    *err = errno;
    return false;
  }
  *out = r;
  std::free(r);
  return true;
}

/**
 * Opens rootPath/segs... beneath rootfd as an O_PATH descriptor following no symlink at any
 * component: openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS where the
 * kernel has it, else one openat(O_PATH|O_NOFOLLOW) per component with an fstat refusing a
 * symlink (upstream doSafeOpen). segs hold no "..", so each step stays beneath the root.
 */
Fd OpenBeneath(int rootfd, const std::string& rootPath, const std::vector<std::string>& segs, bool tryOpenat2, const char** resolver) {
  *resolver = "openat";
  if (segs.empty()) {
    int fd = ::fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) Fail(errno, "open", "dup", rootPath);
    return Fd(fd);
  }
  if (tryOpenat2) {
    const std::string rel = Join("", segs, segs.size()).substr(1);
    OpenHow how{static_cast<uint64_t>(O_PATH | O_NOFOLLOW | O_CLOEXEC), 0, kResolveBeneath | kResolveNoSymlinks | kResolveNoMagicLinks};
    for (int attempt = 0; attempt < 8; attempt++) {
      long fd = ::syscall(SYS_openat2, rootfd, rel.c_str(), &how, sizeof(how));
      if (fd >= 0) {
        Fd out(static_cast<int>(fd));
        struct stat st;
        if (::fstat(out.get(), &st) != 0) Fail(errno, "open", "fstat", Join(rootPath, segs, segs.size()));
        if (S_ISLNK(st.st_mode)) Fail(ELOOP, "open", "unexpected symlink", Join(rootPath, segs, segs.size()));
        *resolver = "openat2";
        return out;
      }
      if (errno == EAGAIN || errno == EINTR) continue;  // a rename raced the lookup: try again
      if (errno == ENOSYS || errno == E2BIG) break;      // no openat2 here: walk by hand
      Fail(errno, "open", "openat2", Join(rootPath, segs, segs.size()));
    }
  }
  int first = ::fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
  if (first < 0) Fail(errno, "open", "dup", rootPath);
  Fd parent(first);
  for (size_t i = 0; i < segs.size(); i++) {
    const std::string cur = Join(rootPath, segs, i + 1);
    Fd child(::openat(parent.get(), segs[i].c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (child.get() < 0) Fail(errno, "open", "openat", cur);
    struct stat st;
    if (::fstat(child.get(), &st) != 0) Fail(errno, "open", "fstat", cur);
    if (S_ISLNK(st.st_mode)) Fail(ELOOP, "open", "unexpected symlink", cur);
    if (i + 1 < segs.size() && !S_ISDIR(st.st_mode)) Fail(ENOTDIR, "open", "openat", cur);
    parent = std::move(child);
  }
  return parent;
}

/** Opens the directory rootReal/segs (a resolved path inside rootReal) with no symlink followed. */
Fd OpenResolvedDir(const std::string& rootReal, const std::string& resolved, bool tryOpenat2, const char* phase) {
  Fd root(::open(rootReal.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (root.get() < 0) Fail(errno, phase, "open", rootReal);
  const char* resolver;
  try {
    return OpenBeneath(root.get(), rootReal, Split(Below(rootReal, resolved), phase), tryOpenat2, &resolver);
  } catch (SubpathError& e) {
    e.phase = phase;
    throw;
  }
}

/**
 * upstream SafeMakeDir: the existing prefix of rootReal/segs is found (its real path must stay
 * inside the volume), opened with no symlink followed, and each missing directory made with
 * mkdirat, opened O_NOFOLLOW (a symlink swapped in fails) and given `mode` with fchmod.
 */
void SafeMakeDir(const std::string& rootReal, const std::vector<std::string>& segs, mode_t mode, bool tryOpenat2) {
  Fd cur(::open(rootReal.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (cur.get() < 0) Fail(errno, "create", "open", rootReal);
  size_t existing = 0;
  for (; existing < segs.size(); existing++) {
    Fd next(::openat(cur.get(), segs[existing].c_str(), O_PATH | O_CLOEXEC));
    if (next.get() < 0) {
      if (errno == ENOENT) break;
      Fail(errno, "create", "openat", Join(rootReal, segs, existing + 1));
    }
    cur = std::move(next);
  }
  if (existing == segs.size()) return;
  const std::string existingPath = Join(rootReal, segs, existing);
  std::string real;
  int err = 0;
  if (!RealPath(existingPath, &real, &err)) Fail(err, "create", "realpath", existingPath);
  if (!Within(rootReal, real)) Fail(EPERM, "create", "path is outside of the volume", existingPath);
  Fd parent = OpenResolvedDir(rootReal, real, tryOpenat2, "create");
  for (size_t i = existing; i < segs.size(); i++) {
    const std::string p = Join(rootReal, segs, i + 1);
    if (::mkdirat(parent.get(), segs[i].c_str(), mode & 07777) != 0) Fail(errno, "create", "mkdirat", p);
    Fd child(::openat(parent.get(), segs[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (child.get() < 0) Fail(errno, "create", "openat", p);
    // mkdirat's mode went through the umask: the subPath gets the volume's own mode
    if (::fchmod(child.get(), mode & 07777) != 0) Fail(errno, "create", "fchmod", p);
    parent = std::move(child);
  }
}

struct Opened {
  Fd fd;
  struct stat st;
  const char* resolver = "openat";
};

/**
 * The subPath opened safely (upstream doBindSubPath up to the mount): symlinks resolved once,
 * the result required inside the volume, then opened with no symlink followed at any step.
 */
Opened OpenSubPath(const std::string& volumePath, const std::string& subPath, bool create, bool tryOpenat2, bool resolve = true) {
  std::string rootReal;
  int err = 0;
  if (!RealPath(volumePath, &rootReal, &err)) Fail(err, "open", "realpath", volumePath);
  const std::vector<std::string> segs = Split(subPath, "open");
  const std::string full = Join(rootReal, segs, segs.size());
  std::string real;
  if (!resolve) {
    // strict: the subPath as written, a symlink anywhere in it refused by the walk
    real = full;
  } else if (!RealPath(full, &real, &err)) {
    if (err != ENOENT || !create) Fail(err, "open", "realpath", full);
    struct stat rst;
    if (::stat(rootReal.c_str(), &rst) != 0) Fail(errno, "create", "stat", rootReal);
    SafeMakeDir(rootReal, segs, rst.st_mode, tryOpenat2);
    if (!RealPath(full, &real, &err)) Fail(err, "open", "realpath", full);
  }
  if (!Within(rootReal, real)) Fail(EPERM, "open", "subpath not within volume path", full);
  Fd root(::open(rootReal.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (root.get() < 0) Fail(errno, "open", "open", rootReal);
  Opened o;
  o.fd = OpenBeneath(root.get(), rootReal, Split(Below(rootReal, real), "open"), tryOpenat2, &o.resolver);
  if (::fstat(o.fd.get(), &o.st) != 0) Fail(errno, "open", "fstat", full);
  return o;
}

/** What sits at dirfd/name: its stat, and whether a mount is on it (its mount differs from the directory's). */
struct EntryState {
  bool exists = false;
  bool mounted = false;
  uint64_t dev = 0;
  uint64_t ino = 0;
  mode_t mode = 0;
};

EntryState Entry(int dirfd, const std::string& name, const std::string& path, const char* phase) {
  EntryState s;
  struct statx tx;
  if (::statx(dirfd, name.c_str(), AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_BASIC_STATS | STATX_MNT_ID, &tx) != 0) {
    if (errno == ENOENT) return s;
    Fail(errno, phase, "statx", path);
  }
  struct statx px;
  if (::statx(dirfd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_MNT_ID, &px) != 0) Fail(errno, phase, "statx", path + "/..");
  s.exists = true;
  s.dev = makedev(tx.stx_dev_major, tx.stx_dev_minor);
  s.ino = tx.stx_ino;
  s.mode = tx.stx_mode;
  if ((tx.stx_mask & STATX_MNT_ID) && (px.stx_mask & STATX_MNT_ID)) {
    s.mounted = tx.stx_mnt_id != px.stx_mnt_id;
  } else if (tx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) {
    s.mounted = (tx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
  } else {
    s.mounted = tx.stx_dev_major != px.stx_dev_major || tx.stx_dev_minor != px.stx_dev_minor;
  }
  return s;
}

/** mkdirat (an existing directory is fine) then open it O_PATH with no symlink followed. */
Fd EnsureDir(int dirfd, const std::string& name, const std::string& path) {
  if (::mkdirat(dirfd, name.c_str(), 0750) != 0 && errno != EEXIST) Fail(errno, "mount", "mkdirat", path);
  Fd fd(::openat(dirfd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) Fail(errno, "mount", "openat", path);
  return fd;
}

/** Unmounts what is on path (kubelet-owned) until nothing is; false when nothing was. */
bool UnmountAll(int dirfd, const std::string& name, const std::string& path, const char* phase) {
  bool any = false;
  for (int i = 0; i < 16; i++) {
    EntryState s = Entry(dirfd, name, path, phase);
    if (!s.exists || !s.mounted) return any;
    if (::umount2(path.c_str(), UMOUNT_NOFOLLOW) != 0 && errno != EINVAL) Fail(errno, phase, "umount", path);
    any = true;
  }
  Fail(EBUSY, phase, "umount (still mounted after 16 unmounts)", path);
}

bool ValidName(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos && n.find('\0') == std::string::npos;
}

struct BindRequest {
  std::string volumePath, subPath, podDir, volumeName, containerName;
  uint32_t index = 0;
  bool openat2 = true;
};

/** upstream doBindSubPath + prepareSubpathTarget; returns whether an existing mount was reused. */
bool Bind(const BindRequest& r, std::string* hostPath) {
  Opened src = OpenSubPath(r.volumePath, r.subPath, true, r.openat2);
  Fd pod(::open(r.podDir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (pod.get() < 0) Fail(errno, "mount", "open", r.podDir);
  std::string path = r.podDir + "/" + kSubpathDir;
  Fd sp = EnsureDir(pod.get(), kSubpathDir, path);
  path += "/" + r.volumeName;
  Fd vol = EnsureDir(sp.get(), r.volumeName, path);
  path += "/" + r.containerName;
  Fd ctr = EnsureDir(vol.get(), r.containerName, path);
  const std::string idx = std::to_string(r.index);
  path += "/" + idx;
  *hostPath = path;

  const bool wantDir = S_ISDIR(src.st.st_mode);
  EntryState t = Entry(ctr.get(), idx, path, "mount");
  if (t.exists && t.mounted) {
    // upstream re-uses a mount of the same file (a container restarted, kubelet-ts restarted)
    if (t.dev == static_cast<uint64_t>(src.st.st_dev) && t.ino == static_cast<uint64_t>(src.st.st_ino)) return true;
    UnmountAll(ctr.get(), idx, path, "mount");
    t = Entry(ctr.get(), idx, path, "mount");
  }
  if (t.exists && (S_ISLNK(t.mode) || S_ISDIR(t.mode) != wantDir)) {
    if (::unlinkat(ctr.get(), idx.c_str(), S_ISDIR(t.mode) ? AT_REMOVEDIR : 0) != 0) Fail(errno, "mount", "unlinkat", path);
    t.exists = false;
  }
  if (!t.exists) {
    if (wantDir) {
      if (::mkdirat(ctr.get(), idx.c_str(), 0750) != 0) Fail(errno, "mount", "mkdirat", path);
    } else {
      // a file is a mount point for any non-directory (file, device, socket, fifo)
      Fd f(::openat(ctr.get(), idx.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640));
      if (f.get() < 0) Fail(errno, "mount", "create", path);
    }
  }
  Fd target(::openat(ctr.get(), idx.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (target.get() < 0) Fail(errno, "mount", "openat", path);
  struct stat tst;
  if (::fstat(target.get(), &tst) != 0) Fail(errno, "mount", "fstat", path);
  if (S_ISLNK(tst.st_mode) || S_ISDIR(tst.st_mode) != wantDir) Fail(EEXIST, "mount", "unexpected file type at", path);

  // both ends by descriptor: nothing is looked up again by name between the open and the mount
  const std::string from = "/proc/self/fd/" + std::to_string(src.fd.get());
  const std::string onto = "/proc/self/fd/" + std::to_string(target.get());
  if (::mount(from.c_str(), onto.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    int err = errno;
    ::unlinkat(ctr.get(), idx.c_str(), wantDir ? AT_REMOVEDIR : 0);
    Fail(err, "mount", "bind mount of " + r.volumePath + "/" + r.subPath + " at", path);
  }
  EntryState after = Entry(ctr.get(), idx, path, "mount");
  if (!after.mounted || after.dev != static_cast<uint64_t>(src.st.st_dev) || after.ino != static_cast<uint64_t>(src.st.st_ino)) {
    ::umount2(path.c_str(), UMOUNT_NOFOLLOW);
    Fail(EIO, "mount", "bind mount not found after mounting at", path);
  }
  return false;
}

/** Entry names of a directory descriptor (dup'd, so dirfd stays open); . and .. left out. */
std::vector<std::string> Names(int dirfd, const std::string& path) {
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) Fail(errno, "clean", "open", path);
  DIR* d = ::fdopendir(fd);
  if (!d) {
    int err = errno;
    ::close(fd);
    Fail(err, "clean", "fdopendir", path);
  }
  std::vector<std::string> out;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    out.emplace_back(e->d_name);
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) Fail(err, "clean", "readdir", path);
  return out;
}

struct CleanResult {
  std::vector<std::string> unmounted;
  std::vector<std::string> errors;
};

/** Opens dirfd/name as a directory without following it; a non-directory there is unlinked (ours). */
bool OpenChildDir(int dirfd, const std::string& name, const std::string& path, Fd* out, CleanResult* res) {
  Fd fd(::openat(dirfd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() >= 0) {
    *out = std::move(fd);
    return true;
  }
  if (errno == ENOENT) return false;
  if (errno == ENOTDIR || errno == ELOOP) {
    if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) res->errors.push_back("unlinkat '" + path + "': " + std::strerror(errno));
    return false;
  }
  res->errors.push_back("openat '" + path + "': " + std::strerror(errno));
  return false;
}

void RemoveDir(int dirfd, const std::string& name, const std::string& path, CleanResult* res, bool quietNotEmpty) {
  if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) return;
  if (quietNotEmpty && (errno == ENOTEMPTY || errno == EEXIST)) return;
  res->errors.push_back("rmdir '" + path + "': " + std::strerror(errno));
}

/** upstream CleanSubPaths for one volume, or for every volume of the pod. */
void Clean(const std::string& podDir, const std::string& only, CleanResult* res) {
  Fd pod(::open(podDir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (pod.get() < 0) {
    if (errno == ENOENT) return;
    Fail(errno, "clean", "open", podDir);
  }
  const std::string spPath = podDir + "/" + kSubpathDir;
  Fd sp;
  if (!OpenChildDir(pod.get(), kSubpathDir, spPath, &sp, res)) return;
  std::vector<std::string> volumes = only.empty() ? Names(sp.get(), spPath) : std::vector<std::string>{only};
  // a directory left below (an error already said why) keeps its parents: no second error for them
  const size_t before = res->errors.size();
  for (const std::string& v : volumes) {
    const std::string vPath = spPath + "/" + v;
    Fd vol;
    if (!OpenChildDir(sp.get(), v, vPath, &vol, res)) continue;
    const size_t beforeVolume = res->errors.size();
    for (const std::string& c : Names(vol.get(), vPath)) {
      const std::string cPath = vPath + "/" + c;
      Fd ctr;
      if (!OpenChildDir(vol.get(), c, cPath, &ctr, res)) continue;
      const size_t beforeContainer = res->errors.size();
      for (const std::string& i : Names(ctr.get(), cPath)) {
        const std::string iPath = cPath + "/" + i;
        try {
          if (UnmountAll(ctr.get(), i, iPath, "clean")) res->unmounted.push_back(iPath);
          EntryState s = Entry(ctr.get(), i, iPath, "clean");
          // a directory not mounted any more is empty: rmdir, never a recursive removal
          if (s.exists && ::unlinkat(ctr.get(), i.c_str(), S_ISDIR(s.mode) ? AT_REMOVEDIR : 0) != 0 && errno != ENOENT) {
            res->errors.push_back("remove '" + iPath + "': " + std::strerror(errno));
          }
        } catch (const SubpathError& e) {
          res->errors.push_back(e.message);
        }
      }
      RemoveDir(vol.get(), c, cPath, res, res->errors.size() > beforeContainer);
    }
    RemoveDir(sp.get(), v, vPath, res, res->errors.size() > beforeVolume);
  }
  // other volumes' subpaths may remain when one volume was cleaned
  RemoveDir(pod.get(), kSubpathDir, spPath, res, !only.empty() || res->errors.size() > before);
}

Napi::Error ToJsError(Napi::Env env, const SubpathError& e) {
  Napi::Error err = Napi::Error::New(env, e.message);
  err.Set("code", Napi::String::New(env, ErrName(e.err)));
  err.Set("errno", Napi::Number::New(env, e.err));
  err.Set("phase", Napi::String::New(env, e.phase));
  return err;
}

/** One job on the threadpool; Run() does the work and OK() builds the answer. */
class SubpathWorker : public Napi::AsyncWorker {
 public:
  explicit SubpathWorker(Napi::Env env, const char* name) : Napi::AsyncWorker(env, name), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() const { return deferred_.Promise(); }

  void Execute() override {
    try {
      Run();
    } catch (const SubpathError& e) {
      failed_ = true;
      error_ = e;
    } catch (const std::exception& e) {
      failed_ = true;
      error_ = SubpathError{EIO, "open", e.what()};
    }
  }
  void OnOK() override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    if (failed_) {
      deferred_.Reject(ToJsError(env, error_).Value());
      return;
    }
    deferred_.Resolve(OK(env));
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 protected:
  virtual void Run() = 0;
  virtual Napi::Value OK(Napi::Env env) = 0;

 private:
  Napi::Promise::Deferred deferred_;
  bool failed_ = false;
  SubpathError error_{0, "", ""};
};

class OpenWorker : public SubpathWorker {
 public:
  OpenWorker(Napi::Env env, std::string vol, std::string sub, bool create, bool openat2, bool resolve)
      : SubpathWorker(env, "kts.subpathOpen"), vol_(std::move(vol)), sub_(std::move(sub)), create_(create), openat2_(openat2), resolve_(resolve) {}

 protected:
  void Run() override {
    Opened o = OpenSubPath(vol_, sub_, create_, openat2_, resolve_);
    char buf[PATH_MAX + 1];
    const std::string link = "/proc/self/fd/" + std::to_string(o.fd.get());
    ssize_t n = ::readlink(link.c_str(), buf, PATH_MAX);
    if (n < 0) Fail(errno, "open", "readlink", link);
    path_.assign(buf, static_cast<size_t>(n));
    st_ = o.st;
    resolver_ = o.resolver;
  }
  Napi::Value OK(Napi::Env env) override {
    Napi::Object o = Napi::Object::New(env);
    o.Set("path", Napi::String::New(env, path_));
    o.Set("dev", Napi::Number::New(env, static_cast<double>(st_.st_dev)));
    o.Set("ino", Napi::Number::New(env, static_cast<double>(st_.st_ino)));
    const char* type = S_ISDIR(st_.st_mode) ? "dir" : S_ISREG(st_.st_mode) ? "file" : S_ISLNK(st_.st_mode) ? "symlink" : "other";
    o.Set("type", Napi::String::New(env, type));
    o.Set("resolver", Napi::String::New(env, resolver_));
    return o;
  }

 private:
  std::string vol_, sub_;
  bool create_, openat2_, resolve_;
  std::string path_;
  struct stat st_ {};
  std::string resolver_;
};

class BindWorker : public SubpathWorker {
 public:
  BindWorker(Napi::Env env, BindRequest r) : SubpathWorker(env, "kts.subpathBind"), r_(std::move(r)) {}

 protected:
  void Run() override { reused_ = Bind(r_, &hostPath_); }
  Napi::Value OK(Napi::Env env) override {
    Napi::Object o = Napi::Object::New(env);
    o.Set("hostPath", Napi::String::New(env, hostPath_));
    o.Set("reused", Napi::Boolean::New(env, reused_));
    return o;
  }

 private:
  BindRequest r_;
  std::string hostPath_;
  bool reused_ = false;
};

class CleanWorker : public SubpathWorker {
 public:
  CleanWorker(Napi::Env env, std::string podDir, std::string volume)
      : SubpathWorker(env, "kts.subpathClean"), podDir_(std::move(podDir)), volume_(std::move(volume)) {}

 protected:
  void Run() override { Clean(podDir_, volume_, &res_); }
  Napi::Value OK(Napi::Env env) override {
    Napi::Object o = Napi::Object::New(env);
    Napi::Array u = Napi::Array::New(env, res_.unmounted.size());
    for (size_t i = 0; i < res_.unmounted.size(); i++) u.Set(i, Napi::String::New(env, res_.unmounted[i]));
    Napi::Array e = Napi::Array::New(env, res_.errors.size());
    for (size_t i = 0; i < res_.errors.size(); i++) e.Set(i, Napi::String::New(env, res_.errors[i]));
    o.Set("unmounted", u);
    o.Set("errors", e);
    return o;
  }

 private:
  std::string podDir_, volume_;
  CleanResult res_;
};

std::string StringArg(Napi::Env env, Napi::Value v, const char* what, bool absolute) {
  if (!v.IsString()) throw Napi::TypeError::New(env, std::string(what) + " must be a string");
  std::string s = v.As<Napi::String>().Utf8Value();
  if (s.find('\0') != std::string::npos) throw Napi::TypeError::New(env, std::string(what) + " contains a NUL byte");
  if (absolute && (s.empty() || s[0] != '/')) throw Napi::TypeError::New(env, std::string(what) + " must be an absolute path");
  return s;
}

bool BoolOpt(Napi::Object o, const char* key, bool def) {
  Napi::Value v = o.Get(key);
  return v.IsBoolean() ? v.As<Napi::Boolean>().Value() : def;
}

Napi::Value SubpathOpen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string vol = StringArg(env, info[0], "subpathOpen: volumePath", true);
  std::string sub = StringArg(env, info[1], "subpathOpen: subPath", false);
  bool create = false, openat2 = true, resolve = true;
  if (info.Length() > 2 && info[2].IsObject()) {
    create = BoolOpt(info[2].As<Napi::Object>(), "create", false);
    openat2 = BoolOpt(info[2].As<Napi::Object>(), "openat2", true);
    resolve = BoolOpt(info[2].As<Napi::Object>(), "resolve", true);
  }
  auto* w = new OpenWorker(env, std::move(vol), std::move(sub), create, openat2, resolve);
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

Napi::Value SubpathBind(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsObject()) throw Napi::TypeError::New(env, "subpathBind(req): req must be an object");
  Napi::Object o = info[0].As<Napi::Object>();
  BindRequest r;
  r.volumePath = StringArg(env, o.Get("volumePath"), "subpathBind: volumePath", true);
  r.subPath = StringArg(env, o.Get("subPath"), "subpathBind: subPath", false);
  r.podDir = StringArg(env, o.Get("podDir"), "subpathBind: podDir", true);
  r.volumeName = StringArg(env, o.Get("volumeName"), "subpathBind: volumeName", false);
  r.containerName = StringArg(env, o.Get("containerName"), "subpathBind: containerName", false);
  if (!ValidName(r.volumeName)) throw Napi::TypeError::New(env, "subpathBind: volumeName must be one path component");
  if (!ValidName(r.containerName)) throw Napi::TypeError::New(env, "subpathBind: containerName must be one path component");
  Napi::Value idx = o.Get("index");
  if (!idx.IsNumber()) throw Napi::TypeError::New(env, "subpathBind: index must be a number");
  double d = idx.As<Napi::Number>().DoubleValue();
  if (!(d >= 0 && d <= 1e6) || d != static_cast<double>(static_cast<uint32_t>(d))) throw Napi::TypeError::New(env, "subpathBind: index must be a whole number from 0");
  r.index = static_cast<uint32_t>(d);
  r.openat2 = BoolOpt(o, "openat2", true);
  auto* w = new BindWorker(env, std::move(r));
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

Napi::Value SubpathClean(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string podDir = StringArg(env, info[0], "subpathClean: podDir", true);
  std::string volume;
  if (info.Length() > 1 && !info[1].IsUndefined()) {
    volume = StringArg(env, info[1], "subpathClean: volumeName", false);
    if (!ValidName(volume)) throw Napi::TypeError::New(env, "subpathClean: volumeName must be one path component");
  }
  auto* w = new CleanWorker(env, std::move(podDir), std::move(volume));
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

}  // namespace

void InitSubpath(Napi::Env env, Napi::Object exports) {
  exports.Set("subpathOpen", Napi::Function::New(env, SubpathOpen, "subpathOpen"));
  exports.Set("subpathBind", Napi::Function::New(env, SubpathBind, "subpathBind"));
  exports.Set("subpathClean", Napi::Function::New(env, SubpathClean, "subpathClean"));
}

}  // namespace kts
