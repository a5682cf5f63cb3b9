{
  "variables": {
    # OOM watcher's eBPF source: built only when clang, bpftool, libbpf headers and BTF are here.
    "kts_ebpf%": "<!(node native/detect-ebpf.mjs)",
    "kts_ebpf_reason%": "<!(node native/detect-ebpf.mjs --reason)"
  },
  "targets": [
    {
      "target_name": "kubelet_ts_native",
      "sources": [
        "native/addon.cc",
        "native/cgroup_reader.cc",
        "native/oom_watcher.cc",
        "native/process_control.cc",
        "native/stat_batch.cc",
        "native/du_batch.cc",
        "native/subpath.cc",
        "native/oom/watcher.cc",
        "native/oom/proc_scan.cc",
        "native/oom/eventfd_backend.cc",
        "native/oom/inotify_backend.cc",
        "native/oom/kmsg_backend.cc",
        "native/oom/threshold_backend.cc",
        "native/oom/pressure_backend.cc",
        "native/oom/ebpf_backend.cc",
        "native/oom_ebpf.cc",
        "native/systemd_units.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      # sd-bus for the systemd cgroup driver (libsystemd-dev to build; libsystemd0 is on every systemd host)
      "libraries": ["-lsystemd"],
      "conditions": [
        ["kts_ebpf==1", {
          "actions": [{
            "action_name": "kts_oom_bpf_object",
            "inputs": ["native/bpf/oom_victim.bpf.c", "native/bpf/oom_victim.h", "native/bpf/build-bpf.mjs", "native/detect-ebpf.mjs"],
            "outputs": ["<(INTERMEDIATE_DIR)/kts_bpf/oom_victim_bpf_obj.h"],
            "action": ["node", "native/bpf/build-bpf.mjs", "<(INTERMEDIATE_DIR)/kts_bpf"]
          }],
          "include_dirs": ["<(INTERMEDIATE_DIR)/kts_bpf"],
          "defines": ["KTS_HAVE_EBPF=1"],
          "libraries": ["-ldl"]
        }, {
          "defines": ["KTS_HAVE_EBPF=0", "KTS_EBPF_UNAVAILABLE_REASON=\"<(kts_ebpf_reason)\""]
        }]
      ]
    }
  ]
}
