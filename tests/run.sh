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
# The libFuzzer targets need clang: the policy loader, and every request's
# decode + validation at the gateway and at the host. Each runs briefly.
if command -v clang >/dev/null 2>&1; then
  cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build-fuzz -j"$(nproc)" --target policy_fuzz gateway_fuzz host_fuzz
  (cd build-fuzz && ctest --output-on-failure -R '^(policy|gateway|host)_fuzz_smoke$')
fi
cd build
ctest --output-on-failure --timeout 900 "$@"
