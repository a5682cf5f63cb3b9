#!/usr/bin/env bash
# Builds the native parsers' libFuzzer harnesses (native/fuzz/*_fuzz.cc, clang with
# -fsanitize=fuzzer,address,undefined) and runs each for a bounded time from its committed
# seeds (test/fuzz/corpus/<harness>/). A crash, a sanitizer report or a broken invariant fails
# the run and names the harness and the input that did it (kept under .cache/fuzz-native/).
#   scripts/fuzz-native.sh [seconds per harness (default 20)] [harness...]
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-20}
shift || true
[[ "$secs" =~ ^[0-9]+$ ]] || { echo "fuzz-native: seconds must be a number, got '$secs'" >&2; exit 2; }
out=.cache/fuzz-native
mkdir -p "$out"
CXX=${CXX:-clang++}
command -v "$CXX" >/dev/null || { echo "fuzz-native: $CXX not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }

# Extra sources a harness links besides itself.
declare -A EXTRA=(
  [cgroup_parse]=""
  [oom_parse]="native/oom/proc_scan.cc native/oom/pressure_backend.cc"
)

if [ "$#" -gt 0 ]; then names=("$@"); else names=("${!EXTRA[@]}"); fi
status=0
for name in $(printf '%s\n' "${names[@]}" | sort); do
  [ -n "${EXTRA[$name]+x}" ] || { echo "fuzz-native: no harness named $name" >&2; exit 2; }
  bin="$out/$name"
  # shellcheck disable=SC2086
  if ! "$CXX" -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -fno-omit-frame-pointer "native/fuzz/${name}_fuzz.cc" ${EXTRA[$name]} -o "$bin" 2>"$out/$name.build.log"; then
    cat "$out/$name.build.log" >&2
    echo "fuzz-native: $name: build failed (libFuzzer's runtime: Debian's libclang-rt-14-dev)" >&2
    exit 2
  fi
  work="$out/$name.corpus"
  mkdir -p "$work" "$out/$name.artifacts"
  seeds="test/fuzz/corpus/$name"
  # -seed: a fixed seed per run (printed), so a failure can be replayed; the input is saved too.
  seed=${KTS_FUZZ_SEED:-$(( (RANDOM << 15 | RANDOM) + 1 ))}
  echo "fuzz-native: $name: ${secs}s, seed $seed"
  if "$bin" -seed="$seed" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$out/$name.artifacts/" "$work" "$seeds" >"$out/$name.log" 2>&1; then
    echo "fuzz-native: $name: ok ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$out/$name.log" | grep -o '[0-9]*$') inputs)"
  else
    grep -E -A30 'ERROR:|runtime error|invariant broken|deadly signal|Test unit written' "$out/$name.log" | head -60 >&2 || tail -40 "$out/$name.log" >&2
    echo "fuzz-native: $name: FAILED with seed $seed (replay: $bin <the input written above>)" >&2
    status=1
  fi
done
exit $status
