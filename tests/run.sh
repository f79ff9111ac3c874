#!/bin/sh
# tests/run.sh — README command (b): install dependencies, then three test
# passes, each in its own build tree (all built with -Werror). Run as root
# (the isolation and cgroup tests need it). Extra arguments go to every
# pass's ctest (e.g. -R tenancy). Every pass runs even if one before it
# failed; the exit status is non-zero if any did.
#
#   normal  build/       the whole CTest suite (RelWithDebInfo). First, so its
#                        results come first.
#   asan    build-asan/  the same suite built with -DSANDGATE_SANITIZE=ON
#                        (ASan + UBSan, UBSan fatal), except the tests labelled
#                        bench or timing (budgets and latency ratios mean
#                        nothing under ASan's slowdown) and vm
#                        (host_cgroup2_vm: a qemu machine, too slow emulated with
#                        ASan on top) and driver-gvisor (the second run
#                        of a suite on the gVisor driver, tests/drivers.py:
#                        the same host code as its process run, and the
#                        gVisor shim and agent have their own ASan-built
#                        tests, label gvisor); the teardown leak test does 300 cycles
#                        instead of 1,000 (SG_SEC_CYCLES). Every process is
#                        instrumented except libsandgate_contain.so, which
#                        Python loads with ctypes.
#                        LeakSanitizer checks each process at exit. Every ASan
#                        and leak report of every process (also the daemons
#                        tests start and stop, whose exit status no test sees)
#                        is written to build-asan/sanitizer/; any report fails
#                        the pass, even when its test passed.
#   fuzz    build-fuzz/  (clang) each libFuzzer target, label fuzz, for its
#                        seconds (20, or 8 where coverage stops growing within
#                        5 s: tests/fuzz/CMakeLists.txt; SANDGATE_FUZZ_SECONDS
#                        overrides all) on its committed corpus
#                        (tests/fuzz/run.sh); prints runs, exec/s, coverage.
#
# The normal and asan passes run SANDGATE_TEST_JOBS tests at a time (ctest -j;
# default twice the cores: most tests wait on daemons, sandboxes and timers,
# not the CPU). Tests that must run alone say so (RUN_SERIAL, label serial),
# CPU-heavy ones take two slots (PROCESSORS 2); see tests/CMakeLists.txt.
#
# SANDGATE_TEST_PASSES picks passes (default "normal asan fuzz"), e.g.
#   SANDGATE_TEST_PASSES=asan ./tests/run.sh -R tenancy
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
./deploy/deps.sh
passes=${SANDGATE_TEST_PASSES:-normal asan fuzz}
jobs=$(nproc)
test_jobs=${SANDGATE_TEST_JOBS:-$((jobs * 2))}
failed=""
times=""

# name command...: run, record its wall time and failure. (set -e does not
# apply inside a function called left of ||, hence the explicit returns.)
timed() {
  name=$1
  shift
  t0=$(date +%s)
  rc=0
  "$@" || rc=$?
  times="$times $name=$(( $(date +%s) - t0 ))s"
  [ "$rc" -eq 0 ] || failed="$failed $name"
}

normal_pass() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || return 1
  cmake --build build -j"$jobs" || return 1
  (cd build && ctest --output-on-failure --timeout 900 -j"$test_jobs" "$@")
}

asan_pass() {
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSANDGATE_SANITIZE=ON >/dev/null ||
    return 1
  cmake --build build-asan -j"$jobs" || return 1
  san=$repo/build-asan/sanitizer
  rm -rf "$san"
  mkdir -p "$san"
  # ASan and LeakSanitizer write one file per reporting process
  # (asan.<pid>); a process that opens its report file early (the gVisor
  # shim, before it chroots) leaves it empty when it has nothing to report,
  # so only non-empty files count. gcc's UBSan under ASan ignores log_path: its reports go to
  # the process's stderr (the test's output, or a daemon's log, which the
  # tests print when they fail), and being fatal they kill the process.
  # Sandboxes' pid 1 (sandgate-init) starts with a clean environment, so it
  # reports with the default options on its stderr, the host's log.
  rc=0
  (cd build-asan &&
   ASAN_OPTIONS="detect_leaks=1:log_path=$san/asan" \
   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
   SG_SEC_CYCLES="${SG_SEC_CYCLES:-300}" \
   ctest --output-on-failure --timeout 900 -j"$test_jobs" -LE 'bench|timing|vm|driver-gvisor' "$@") || rc=$?
  reports=$(find "$san" -type f -size +0 | sort)
  if [ -n "$reports" ]; then
    for f in $reports; do
      echo "==== sanitizer report $f"
      cat "$f"
    done
    echo "asan pass: $(echo "$reports" | wc -l) sanitizer report(s) above" >&2
    return 1
  fi
  return "$rc"
}

fuzz_pass() {
  if ! command -v clang >/dev/null 2>&1; then
    echo "fuzz pass: no clang (deploy/packages.txt installs it)" >&2
    return 1
  fi
  cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null ||
    return 1
  cmake --build build-fuzz -j"$jobs" --target fuzzers || return 1
  rc=0
  (cd build-fuzz && ctest --output-on-failure -j"$jobs" -L fuzz "$@") || rc=$?
  cat build-fuzz/fuzz/*/summary 2>/dev/null || true
  return "$rc"
}

for p in $passes; do
  echo "==== tests/run.sh: $p pass"
  case $p in
    normal) timed normal normal_pass "$@" ;;
    asan) timed asan asan_pass "$@" ;;
    fuzz) timed fuzz fuzz_pass "$@" ;;
    *) echo "tests/run.sh: unknown pass '$p' (normal, asan, fuzz)" >&2; exit 2 ;;
  esac
done
echo "==== tests/run.sh: wall time per pass (build included):$times"
if [ -n "$failed" ]; then
  echo "tests/run.sh: FAILED:$failed" >&2
  exit 1
fi
