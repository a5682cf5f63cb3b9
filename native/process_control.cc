// Process-level controls: exec in place (the launcher applies V8/glibc settings that must be
// present at process start) and malloc trimming (glibc arenas keep freed pages otherwise).
#include "process_control.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kts {
namespace {

std::vector<std::string> StringArray(const Napi::Env& env, const Napi::Value& v, const char* what) {
  if (!v.IsArray()) throw Napi::TypeError::New(env, std::string(what) + " must be an array of strings");
  Napi::Array a = v.As<Napi::Array>();
  std::vector<std::string> out;
  out.reserve(a.Length());
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value e = a.Get(i);
    if (!e.IsString()) throw Napi::TypeError::New(env, std::string(what) + "[" + std::to_string(i) + "] is not a string");
    out.push_back(e.As<Napi::String>().Utf8Value());
  }
  return out;
}

std::vector<char*> CArray(std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

Napi::Value Execve(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsString()) throw Napi::TypeError::New(env, "execve(file, argv, env)");
  std::string file = info[0].As<Napi::String>().Utf8Value();
  std::vector<std::string> argv = StringArray(env, info[1], "argv");
  std::vector<std::string> envp = StringArray(env, info[2], "env");
  if (argv.empty()) throw Napi::TypeError::New(env, "argv must name the program (argv[0])");
  std::vector<char*> cargv = CArray(argv);
  std::vector<char*> cenv = CArray(envp);
  // Node marks stdin/stdout/stderr close-on-exec: the new image must keep them.
  int fdFlags[3];
  for (int fd = 0; fd < 3; fd++) {
    fdFlags[fd] = ::fcntl(fd, F_GETFD);
    if (fdFlags[fd] >= 0 && (fdFlags[fd] & FD_CLOEXEC)) ::fcntl(fd, F_SETFD, fdFlags[fd] & ~FD_CLOEXEC);
  }
  ::execve(file.c_str(), cargv.data(), cenv.data());
  int err = errno;
  for (int fd = 0; fd < 3; fd++) {
    if (fdFlags[fd] >= 0) ::fcntl(fd, F_SETFD, fdFlags[fd]);
  }
  Napi::Error e = Napi::Error::New(env, "execve " + file + ": " + std::strerror(err));
  e.Set("errno", Napi::Number::New(env, err));
  throw e;
}

Napi::Value MallocTrim(const Napi::CallbackInfo& info) {
#if defined(__GLIBC__)
  return Napi::Boolean::New(info.Env(), ::malloc_trim(0) != 0);
#else
  return Napi::Boolean::New(info.Env(), false);
#endif
}

Napi::Value MallocInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 m = ::mallinfo2();
  o.Set("arenaBytes", Napi::Number::New(env, static_cast<double>(m.arena)));
  o.Set("inUseBytes", Napi::Number::New(env, static_cast<double>(m.uordblks)));
  o.Set("freeBytes", Napi::Number::New(env, static_cast<double>(m.fordblks)));
  o.Set("mmapBytes", Napi::Number::New(env, static_cast<double>(m.hblkhd)));
#endif
  return o;
}

}  // namespace

void InitProcessControl(Napi::Env env, Napi::Object exports) {
  exports.Set("execve", Napi::Function::New(env, Execve, "execve"));
  exports.Set("mallocTrim", Napi::Function::New(env, MallocTrim, "mallocTrim"));
  exports.Set("mallocInfo", Napi::Function::New(env, MallocInfo, "mallocInfo"));
}

}  // namespace kts
