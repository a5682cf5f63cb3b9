{
  "targets": [
    {
      "target_name": "kubelet_ts_native",
      "sources": [
        "native/addon.cc",
        "native/cgroup_reader.cc",
        "native/oom_watcher.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
