#!/bin/sh
# tests/run.sh — README command (b): install dependencies, build (with
# -Werror), and run the whole test suite with CTest. Run as root (the
# isolation and cgroup tests need it). Extra arguments go to ctest.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
./deploy/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
# The libFuzzer targets (label fuzz) need clang; each runs a bounded time
# (tests/fuzz/run.sh, SANDGATE_FUZZ_SECONDS, default 20).
if command -v clang >/dev/null 2>&1; then
  cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build-fuzz -j"$(nproc)" --target fuzzers
  (cd build-fuzz && ctest --output-on-failure -j"$(nproc)" -L fuzz && cat fuzz/*/summary)
fi
cd build
ctest --output-on-failure --timeout 900 "$@"
