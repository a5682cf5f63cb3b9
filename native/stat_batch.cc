// Batched stat(2) on the libuv threadpool (see stat_batch.h for the JS API and row layout).
#include "stat_batch.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace kts {
namespace {

const char* const kFields[kStatBatchRow] = {
    "errno", "mode", "size", "ino", "dev", "mtimeSec", "mtimeNsec", "ctimeSec", "ctimeNsec",
};

class StatBatchWorker : public Napi::AsyncWorker {
 public:
  StatBatchWorker(Napi::Env env, std::string paths, std::vector<uint32_t> starts)
      : Napi::AsyncWorker(env, "kts.statBatch"),
        deferred_(Napi::Promise::Deferred::New(env)),
        paths_(std::move(paths)),
        starts_(std::move(starts)),
        rows_(starts_.size() * kStatBatchRow, 0.0) {}

  Napi::Promise Promise() const { return deferred_.Promise(); }

  void Execute() override {
    for (size_t i = 0; i < starts_.size(); i++) {
      double* row = rows_.data() + i * kStatBatchRow;
      struct stat st;
      if (::stat(paths_.data() + starts_[i], &st) != 0) {
        row[0] = errno;
        continue;
      }
      row[1] = static_cast<double>(st.st_mode);
      row[2] = static_cast<double>(st.st_size);
      row[3] = static_cast<double>(st.st_ino);
      row[4] = static_cast<double>(st.st_dev);
      row[5] = static_cast<double>(st.st_mtim.tv_sec);
      row[6] = static_cast<double>(st.st_mtim.tv_nsec);
      row[7] = static_cast<double>(st.st_ctim.tv_sec);
      row[8] = static_cast<double>(st.st_ctim.tv_nsec);
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Napi::Float64Array out = Napi::Float64Array::New(env, rows_.size());
    if (!rows_.empty()) std::memcpy(out.Data(), rows_.data(), rows_.size() * sizeof(double));
    deferred_.Resolve(out);
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  std::string paths_;             // every path, each NUL-terminated
  std::vector<uint32_t> starts_;  // offset of each path in paths_
  std::vector<double> rows_;
};

Napi::Value StatBatch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string paths;
  std::vector<uint32_t> starts;
  Napi::Value arg = info.Length() > 0 ? info[0] : env.Undefined();
  if (arg.IsArray()) {
    Napi::Array a = arg.As<Napi::Array>();
    const uint32_t n = a.Length();
    starts.reserve(n);
    for (uint32_t i = 0; i < n; i++) {
      Napi::Value e = a.Get(i);
      if (!e.IsString()) throw Napi::TypeError::New(env, "statBatch: paths[" + std::to_string(i) + "] is not a string");
      std::string s = e.As<Napi::String>().Utf8Value();
      if (std::memchr(s.data(), '\0', s.size()) != nullptr) {
        throw Napi::TypeError::New(env, "statBatch: paths[" + std::to_string(i) + "] contains a NUL byte");
      }
      if (paths.size() + s.size() + 1 > UINT32_MAX) throw Napi::TypeError::New(env, "statBatch: paths too long");
      starts.push_back(static_cast<uint32_t>(paths.size()));
      paths.append(s);
      paths.push_back('\0');
    }
  } else if (arg.IsTypedArray() && arg.As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array) {
    Napi::Uint8Array bytes = arg.As<Napi::Uint8Array>();
    if (bytes.ElementLength() > UINT32_MAX) throw Napi::TypeError::New(env, "statBatch: paths too long");
    paths.assign(reinterpret_cast<const char*>(bytes.Data()), bytes.ElementLength());
    if (!paths.empty() && paths.back() != '\0') {
      throw Napi::TypeError::New(env, "statBatch: paths bytes must end with a NUL (NUL-terminated paths)");
    }
    size_t at = 0;
    while (at < paths.size()) {
      // an empty entry stats "" (ENOENT), as fs.stat('') does
      const size_t nul = paths.find('\0', at);
      starts.push_back(static_cast<uint32_t>(at));
      at = nul + 1;
    }
  } else {
    throw Napi::TypeError::New(env, "statBatch(paths: string[] | Uint8Array): paths must be an array of strings or NUL-terminated UTF-8 bytes");
  }
  auto* worker = new StatBatchWorker(env, std::move(paths), std::move(starts));
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value StatBatchFields(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array out = Napi::Array::New(env, kStatBatchRow);
  for (uint32_t i = 0; i < kStatBatchRow; i++) out.Set(i, Napi::String::New(env, kFields[i]));
  return out;
}

}  // namespace

void InitStatBatch(Napi::Env env, Napi::Object exports) {
  exports.Set("statBatch", Napi::Function::New(env, StatBatch, "statBatch"));
  exports.Set("statBatchFields", Napi::Function::New(env, StatBatchFields, "statBatchFields"));
}

}  // namespace kts
