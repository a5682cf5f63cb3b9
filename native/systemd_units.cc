// systemd transient units over sd-bus (see systemd_units.h for the JS API).
#include "systemd_units.h"

#include <systemd/sd-bus.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace kts {
namespace {

constexpr const char* kService = "org.freedesktop.systemd1";
constexpr const char* kPath = "/org/freedesktop/systemd1";
constexpr const char* kManager = "org.freedesktop.systemd1.Manager";

struct Property {
  std::string name;
  std::string type;  // s, b, t, as
  std::string str;
  bool boolean = false;
  uint64_t u64 = 0;
  std::vector<std::string> strv;
};

struct Request {
  std::string op;
  std::string address;
  bool busClient = false;
  std::string unit;
  std::string mode = "replace";
  bool runtime = true;
  std::vector<Property> properties;
  uint64_t timeoutUs = 30ull * 1000 * 1000;
};

struct Answer {
  std::string job;
  std::string result;
  std::string errorName;
  std::string errorMessage;
};

uint64_t NowUs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000ull + static_cast<uint64_t>(ts.tv_nsec) / 1000ull;
}

std::string ErrnoText(int r) { return std::strerror(r < 0 ? -r : r); }

/** Where JobRemoved is told: the job path waited for and, once seen, its result. */
struct JobWait {
  std::string job;
  std::string result;
  bool done = false;
};

int OnJobRemoved(sd_bus_message* m, void* userdata, sd_bus_error*) {
  auto* w = static_cast<JobWait*>(userdata);
  uint32_t id = 0;
  const char* path = nullptr;
  const char* unit = nullptr;
  const char* result = nullptr;
  if (sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0) return 0;
  if (!w->job.empty() && path && w->job == path) {
    w->result = result ? result : "";
    w->done = true;
  }
  return 0;
}

/** Appends a(sv) of the properties. */
int AppendProperties(sd_bus_message* m, const std::vector<Property>& props) {
  int r = sd_bus_message_open_container(m, 'a', "(sv)");
  if (r < 0) return r;
  for (const auto& p : props) {
    if ((r = sd_bus_message_open_container(m, 'r', "sv")) < 0) return r;
    if ((r = sd_bus_message_append(m, "s", p.name.c_str())) < 0) return r;
    if ((r = sd_bus_message_open_container(m, 'v', p.type.c_str())) < 0) return r;
    if (p.type == "s") {
      r = sd_bus_message_append(m, "s", p.str.c_str());
    } else if (p.type == "b") {
      r = sd_bus_message_append(m, "b", p.boolean ? 1 : 0);
    } else if (p.type == "t") {
      r = sd_bus_message_append(m, "t", p.u64);
    } else {
      std::vector<char*> v;
      for (const auto& s : p.strv) v.push_back(const_cast<char*>(s.c_str()));
      v.push_back(nullptr);
      r = sd_bus_message_append_strv(m, v.data());
    }
    if (r < 0) return r;
    if ((r = sd_bus_message_close_container(m)) < 0) return r;
    if ((r = sd_bus_message_close_container(m)) < 0) return r;
  }
  return sd_bus_message_close_container(m);
}

class SystemdUnitWorker : public Napi::AsyncWorker {
 public:
  SystemdUnitWorker(Napi::Env env, Request req)
      : Napi::AsyncWorker(env, "kts.systemdUnitCall"), deferred_(Napi::Promise::Deferred::New(env)), req_(std::move(req)) {}

  Napi::Promise Promise() const { return deferred_.Promise(); }

 protected:
  void Execute() override {
    sd_bus* bus = nullptr;
    std::string err = Run(&bus);
    if (bus) sd_bus_flush_close_unref(bus);
    if (!err.empty()) SetError(err);
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::Object o = Napi::Object::New(env);
    if (!answer_.job.empty()) o.Set("job", answer_.job);
    if (!answer_.result.empty()) o.Set("result", answer_.result);
    if (!answer_.errorName.empty()) {
      o.Set("errorName", answer_.errorName);
      o.Set("errorMessage", answer_.errorMessage);
    }
    deferred_.Resolve(o);
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  std::string Where() const { return "systemd " + req_.op + " " + req_.unit + " (" + req_.address + "): "; }

  std::string Run(sd_bus** out) {
    const uint64_t deadline = NowUs() + req_.timeoutUs;
    int r = sd_bus_new(out);
    if (r < 0) return Where() + "sd_bus_new: " + ErrnoText(r);
    sd_bus* bus = *out;
    if ((r = sd_bus_set_address(bus, req_.address.c_str())) < 0) return Where() + "bad address: " + ErrnoText(r);
    if (req_.busClient && (r = sd_bus_set_bus_client(bus, 1)) < 0) return Where() + "sd_bus_set_bus_client: " + ErrnoText(r);
    sd_bus_set_method_call_timeout(bus, req_.timeoutUs);
    if ((r = sd_bus_start(bus)) < 0) return Where() + "connecting: " + ErrnoText(r);

    const bool waitsForJob = req_.op != "set";
    JobWait wait;
    sd_bus_slot* slot = nullptr;
    if (waitsForJob) {
      // The match is in place before the call, so the job's end cannot be missed.
      r = sd_bus_match_signal(bus, &slot, req_.busClient ? kService : nullptr, kPath, kManager, "JobRemoved", OnJobRemoved, &wait);
      if (r < 0) return Where() + "matching JobRemoved: " + ErrnoText(r);
      sd_bus_error e = SD_BUS_ERROR_NULL;
      r = sd_bus_call_method(bus, kService, kPath, kManager, "Subscribe", &e, nullptr, "");
      // AlreadySubscribed or the like: the signals come all the same
      sd_bus_error_free(&e);
    }

    sd_bus_message* m = nullptr;
    const char* method = req_.op == "start" ? "StartTransientUnit" : req_.op == "stop" ? "StopUnit" : "SetUnitProperties";
    if ((r = sd_bus_message_new_method_call(bus, &m, kService, kPath, kManager, method)) < 0) return Where() + "new call: " + ErrnoText(r);
    if (req_.op == "start") {
      r = sd_bus_message_append(m, "ss", req_.unit.c_str(), req_.mode.c_str());
      if (r >= 0) r = AppendProperties(m, req_.properties);
      if (r >= 0) r = sd_bus_message_append(m, "a(sa(sv))", 0);
    } else if (req_.op == "stop") {
      r = sd_bus_message_append(m, "ss", req_.unit.c_str(), req_.mode.c_str());
    } else {
      r = sd_bus_message_append(m, "sb", req_.unit.c_str(), req_.runtime ? 1 : 0);
      if (r >= 0) r = AppendProperties(m, req_.properties);
    }
    if (r < 0) {
      sd_bus_message_unref(m);
      return Where() + "building the call: " + ErrnoText(r);
    }
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message* reply = nullptr;
    r = sd_bus_call(bus, m, req_.timeoutUs, &e, &reply);
    sd_bus_message_unref(m);
    if (r < 0) {
      if (sd_bus_error_is_set(&e)) {
        answer_.errorName = e.name ? e.name : "";
        answer_.errorMessage = e.message ? e.message : "";
        sd_bus_error_free(&e);
        if (slot) sd_bus_slot_unref(slot);
        return "";
      }
      sd_bus_error_free(&e);
      if (slot) sd_bus_slot_unref(slot);
      return Where() + method + ": " + ErrnoText(r);
    }
    if (waitsForJob) {
      const char* job = nullptr;
      r = sd_bus_message_read(reply, "o", &job);
      if (r >= 0 && job) wait.job = job;
    }
    sd_bus_message_unref(reply);
    if (!waitsForJob) return "";
    if (wait.job.empty()) {
      sd_bus_slot_unref(slot);
      return Where() + method + " answered no job";
    }
    answer_.job = wait.job;
    while (!wait.done) {
      r = sd_bus_process(bus, nullptr);
      if (r < 0) {
        sd_bus_slot_unref(slot);
        return Where() + "waiting for job " + wait.job + ": " + ErrnoText(r);
      }
      if (r > 0) continue;
      uint64_t now = NowUs();
      if (now >= deadline) {
        sd_bus_slot_unref(slot);
        return Where() + "timed out waiting for job " + wait.job;
      }
      r = sd_bus_wait(bus, deadline - now);
      if (r < 0) {
        sd_bus_slot_unref(slot);
        return Where() + "waiting for job " + wait.job + ": " + ErrnoText(r);
      }
    }
    answer_.result = wait.result;
    sd_bus_slot_unref(slot);
    return "";
  }

  Napi::Promise::Deferred deferred_;
  Request req_;
  Answer answer_;
};

std::string StringField(const Napi::Object& o, const char* key, bool required) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() && !required) return "";
  if (!v.IsString()) throw Napi::TypeError::New(o.Env(), std::string("systemdUnitCall: ") + key + " must be a string");
  return v.As<Napi::String>().Utf8Value();
}

Napi::Value SystemdUnitCall(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) throw Napi::TypeError::New(env, "systemdUnitCall: the request must be an object");
  Napi::Object o = info[0].As<Napi::Object>();
  Request req;
  req.op = StringField(o, "op", true);
  if (req.op != "start" && req.op != "set" && req.op != "stop") throw Napi::TypeError::New(env, "systemdUnitCall: op must be start, set or stop");
  req.address = StringField(o, "address", true);
  req.busClient = o.Get("busClient").ToBoolean().Value();
  req.unit = StringField(o, "unit", true);
  if (req.unit.empty()) throw Napi::TypeError::New(env, "systemdUnitCall: unit must not be empty");
  std::string mode = StringField(o, "mode", false);
  if (!mode.empty()) req.mode = mode;
  Napi::Value rt = o.Get("runtime");
  if (!rt.IsUndefined()) req.runtime = rt.ToBoolean().Value();
  Napi::Value to = o.Get("timeoutMs");
  if (!to.IsNumber() || to.As<Napi::Number>().DoubleValue() <= 0) throw Napi::TypeError::New(env, "systemdUnitCall: timeoutMs must be a positive number");
  req.timeoutUs = static_cast<uint64_t>(to.As<Napi::Number>().DoubleValue() * 1000.0);
  Napi::Value props = o.Get("properties");
  if (!props.IsUndefined()) {
    if (!props.IsArray()) throw Napi::TypeError::New(env, "systemdUnitCall: properties must be an array");
    Napi::Array arr = props.As<Napi::Array>();
    for (uint32_t i = 0; i < arr.Length(); i++) {
      Napi::Value pv = arr.Get(i);
      if (!pv.IsObject()) throw Napi::TypeError::New(env, "systemdUnitCall: properties[" + std::to_string(i) + "] must be an object");
      Napi::Object po = pv.As<Napi::Object>();
      Property p;
      p.name = StringField(po, "name", true);
      p.type = StringField(po, "type", true);
      Napi::Value v = po.Get("value");
      const std::string where = "systemdUnitCall: property " + p.name + " ";
      if (p.type == "s") {
        if (!v.IsString()) throw Napi::TypeError::New(env, where + "must have a string value");
        p.str = v.As<Napi::String>().Utf8Value();
      } else if (p.type == "b") {
        if (!v.IsBoolean()) throw Napi::TypeError::New(env, where + "must have a boolean value");
        p.boolean = v.As<Napi::Boolean>().Value();
      } else if (p.type == "t") {
        if (v.IsBigInt()) {
          bool lossless = false;
          p.u64 = v.As<Napi::BigInt>().Uint64Value(&lossless);
          if (!lossless) throw Napi::TypeError::New(env, where + "must fit in an unsigned 64-bit integer");
        } else if (v.IsNumber() && v.As<Napi::Number>().DoubleValue() >= 0) {
          p.u64 = static_cast<uint64_t>(v.As<Napi::Number>().DoubleValue());
        } else {
          throw Napi::TypeError::New(env, where + "must have a non-negative integer value");
        }
      } else if (p.type == "as") {
        if (!v.IsArray()) throw Napi::TypeError::New(env, where + "must have an array of strings");
        Napi::Array a = v.As<Napi::Array>();
        for (uint32_t j = 0; j < a.Length(); j++) {
          Napi::Value s = a.Get(j);
          if (!s.IsString()) throw Napi::TypeError::New(env, where + "must have an array of strings");
          p.strv.push_back(s.As<Napi::String>().Utf8Value());
        }
      } else {
        throw Napi::TypeError::New(env, where + "has type " + p.type + " (s, b, t or as expected)");
      }
      req.properties.push_back(std::move(p));
    }
  }
  auto* worker = new SystemdUnitWorker(env, std::move(req));
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

}  // namespace

void InitSystemdUnits(Napi::Env env, Napi::Object exports) {
  exports.Set("systemdUnitCall", Napi::Function::New(env, SystemdUnitCall, "systemdUnitCall"));
}

}  // namespace kts
