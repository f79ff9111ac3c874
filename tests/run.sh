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
cd build
ctest --output-on-failure --timeout 900 "$@"
