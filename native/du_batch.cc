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

/** du + find of one tree. Returns false when the root does not exist; throws WalkError on failure. */
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
  std::vector<std::string> dirs{root};
  std::vector<std::pair<std::string, unsigned char>> names;
  while (!dirs.empty()) {
    std::string dir = std::move(dirs.back());
    dirs.pop_back();
    names.clear();
    int err = 0;
    if (!ListDir(dir, &names, &err)) {
      if (Gone(err)) continue;
      throw WalkError{err, "opendir", dir};
    }
    for (const auto& n : names) {
      std::string p = dir + "/" + n.first;
      struct stat s;
      if (::lstat(p.c_str(), &s) != 0) {
        if (Gone(errno)) continue;
        throw WalkError{errno, "lstat", p};
      }
      // -x: another filesystem mounted below is not this tree's usage
      if (s.st_dev != dev) continue;
      count(s);
      if (S_ISDIR(s.st_mode)) dirs.push_back(std::move(p));
    }
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
