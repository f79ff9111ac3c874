#!/usr/bin/env bash
# bench/registry_create.sh — CreateSandbox latency through the gateway in
# the embedded mode (a static host list) and in the etcd mode (hosts from
# the registry), side by side, against the same host (issue 15's target:
# etcd mode p50 <= 15 ms, p99 <= 40 ms on loopback).
#
#   bench/registry_create.sh [--build DIR] [-n N] [--reps R] [--policy FILE]
#
# Starts its own etcd member (loopback, free ports, a temp data dir), one
# host registered in it, and two gateways on that host: one with
# `hosts: [...]`, one with `registry:`. The runs alternate between the two
# (R each, N creates each, every create followed by its kill, as bench_create
# --mode b2b does), so both see the same machine; p50/p99 are over all the
# samples of a mode. Everything it starts is stopped by PID at exit.
# Prints "RESULT mode=embedded n=.. p50_ms=.. p99_ms=.." and one for etcd.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
build=$repo/build
n=100
reps=3
policy=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift ;;
    -n) n=$2; shift ;;
    --reps) reps=$2; shift ;;
    --policy) policy=$2; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "registry_create.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
bin=$build/bin
key=sg-demo-key-0001
for b in etcd etcdctl; do command -v $b >/dev/null || { echo "registry_create.sh: $b missing (etcd-server, etcd-client)" >&2; exit 2; }; done
work=$(mktemp -d /tmp/sgregbench.XXXXXX)
pids=()
cleanup() {
  set +e
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[$i]}" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null
  done
  [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT
port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
waitfile() { for _ in $(seq 1 300); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "registry_create.sh: $1 never appeared" >&2; tail -5 "$2" >&2; exit 1; }

cp=$(port); pp=$(port)
etcd --name b0 --data-dir "$work/etcd" --listen-client-urls "http://127.0.0.1:$cp" \
  --advertise-client-urls "http://127.0.0.1:$cp" --listen-peer-urls "http://127.0.0.1:$pp" \
  --initial-advertise-peer-urls "http://127.0.0.1:$pp" --initial-cluster "b0=http://127.0.0.1:$pp" \
  >"$work/etcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do ETCDCTL_API=3 etcdctl --endpoints="127.0.0.1:$cp" put /ready 1 >/dev/null 2>&1 && break; sleep 0.1; done

if [ -z "$policy" ]; then   # deploy/local's tenant, quotas lifted
  policy=$work/policy.yaml
  sed -e 's/sandboxes_per_tenant: .*/sandboxes_per_tenant: 1000000/' \
      -e 's/sandboxes_per_user: .*/sandboxes_per_user: 1000000/' \
      -e 's/rate_per_s: .*/rate_per_s: 1000000/' -e 's/rate_burst: .*/rate_burst: 1000000/' \
      "$repo/deploy/local/policy.yaml" >"$policy"
fi
registry="registry:
  etcd: [\"127.0.0.1:$cp\"]
  prefix: /sgbench-$$/"
mkdir -p "$work/rt"
sed -e "s|^runtime_dir:.*|runtime_dir: $work/rt|" -e "s|^uid_base:.*|uid_base: 420000|" \
    -e "s|^name:.*|name: sgbreg|" "$repo/deploy/local/host.yaml" >"$work/host.yaml"
# the process template only (tests/drivers.py), as bench/run.sh: no gVisor
# pool warming beside the creates this script times
SANDGATE_TEST_DRIVER=process /usr/bin/python3 "$repo/tests/drivers.py" "$work/host.yaml"
printf '%s\n  lease_ttl: 5\n' "$registry" >>"$work/host.yaml"
"$bin/sandgate-host" --config "$work/host.yaml" --listen 127.0.0.1:0 --port-file "$work/host.port" \
  >"$work/host.log" 2>&1 &
pids+=($!)
waitfile "$work/host.port" "$work/host.log"
hp=$(cat "$work/host.port")
printf 'listen: "127.0.0.1:1"\npolicy: "%s"\nhosts:\n  - name: sgbreg\n    address: "127.0.0.1:%s"\n' \
  "$policy" "$hp" >"$work/gw-embedded.yaml"
printf 'listen: "127.0.0.1:1"\npolicy: "%s"\n%s\n' "$policy" "$registry" >"$work/gw-etcd.yaml"
declare -A addr
for m in embedded etcd; do
  "$bin/sandgate" --config "$work/gw-$m.yaml" --listen 127.0.0.1:0 --port-file "$work/gw-$m.port" \
    >"$work/gw-$m.log" 2>&1 &
  pids+=($!)
  waitfile "$work/gw-$m.port" "$work/gw-$m.log"
  addr[$m]=127.0.0.1:$(cat "$work/gw-$m.port")
  # ready when a create goes through (the etcd gateway must see the host)
  ok=0
  for _ in $(seq 1 100); do
    if "$bin/bench_create" --addr "${addr[$m]}" --key "$key" -n 1 --mode b2b >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.1
  done
  [ "$ok" = 1 ] || { echo "registry_create.sh: no create through the $m gateway" >&2; tail -5 "$work/gw-$m.log" >&2; exit 1; }
done
# warm-up, then alternating runs
for m in embedded etcd; do "$bin/bench_create" --addr "${addr[$m]}" --key "$key" -n 10 --mode b2b >/dev/null; done
for r in $(seq 1 "$reps"); do
  for m in embedded etcd; do
    "$bin/bench_create" --addr "${addr[$m]}" --key "$key" -n "$n" --mode b2b --csv "$work/$m.$r.csv" \
      >"$work/$m.$r.out" 2>>"$work/bench.err" || { echo "registry_create.sh: bench_create ($m) failed" >&2; tail -3 "$work/bench.err" >&2; exit 1; }
  done
done
for m in embedded etcd; do
  cat "$work/$m".*.csv | cut -d, -f3 | sort -g | awk -v m="$m" '
    { v[NR] = $1 }
    function q(p,  i) { i = int(p * NR + 0.999999); if (i < 1) i = 1; return v[i] }
    END { printf "RESULT mode=%s n=%d p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", m, NR, q(0.5), q(0.9), q(0.99), v[NR] }'
done
