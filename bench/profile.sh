#!/usr/bin/env bash
# bench/profile.sh — where the gateway's CPU goes under unary load (issue 7's
# "profile it"). Starts a host and a gateway (deploy/local/run.sh, ephemeral
# ports, the bench policy of run.sh), drives GetSandbox at -c 16 with
# bench_load, records the gateway with `perf record -g`, and prints the top
# symbols (self time), the top shared objects and the CPU µs per call.
#
#   bench/profile.sh [--build DIR] [--secs S] [-c N] [--call get|run] [--callgrind]
#
# --call: the gateway call to drive, GetSandbox (get, default) or RunCode
# x=1+1 (run; the relay and nginx counts stay on GetSandbox).
#
# --callgrind: instead run the gateway under valgrind --tool=callgrind for a
# fixed number of calls and print instruction counts per call (slow); then
# the same count for bench_relay (the gateway's forward with none of
# sandgate's code) and for nginx grpc_pass (one process, the config of
# run.sh), forwarding GetSandbox calls to the same host.
# Instruction counts do not move with the VM's noise the way rates do.
# Packages: linux-perf, valgrind.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
build=$repo/build
secs=10
conc=16
call=get
cg=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift ;;
    --secs) secs=$2; shift ;;
    -c) conc=$2; shift ;;
    --call) call=$2; shift ;;
    --callgrind) cg=1 ;;
    *) echo "profile.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
key=sg-demo-key-0001
work=$(mktemp -d /tmp/sgprof.XXXXXX)
run=$work/run
cleanup() {
  set +e
  [ -n "${vg_pid:-}" ] && kill "$vg_pid" 2>/dev/null && wait "$vg_pid" 2>/dev/null
  [ -n "${ng_pid:-}" ] && kill "$ng_pid" 2>/dev/null && wait "$ng_pid" 2>/dev/null
  [ -n "${rl_pid:-}" ] && kill "$rl_pid" 2>/dev/null && wait "$rl_pid" 2>/dev/null
  SANDGATE_RUN_DIR=$run "$repo/deploy/local/run.sh" stop >/dev/null 2>&1
  [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT
# run.sh's bench policy (quotas lifted), taken from run.sh itself.
sed -n "/^cat >\"\$work\/policy.yaml\" <<'YAML'/,/^YAML/p" "$here/run.sh" | sed '1d;$d' >"$work/policy.yaml"
mkdir -p "$run" "$work/rt"
sed -e "s|^runtime_dir:.*|runtime_dir: $work/rt|" -e "s|^name:.*|name: prof|" -e "s|^uid_base:.*|uid_base: 450000|" \
    "$repo/deploy/local/host.yaml" >"$work/host.yaml"
SANDGATE_TEST_DRIVER=process /usr/bin/python3 "$repo/tests/drivers.py" "$work/host.yaml"
SANDGATE_BUILD=$build SANDGATE_RUN_DIR=$run SANDGATE_PORT=0 SANDGATE_HOST_PORT=0 \
  SANDGATE_POLICY=$work/policy.yaml SANDGATE_HOST_CONFIG=$work/host.yaml "$repo/deploy/local/run.sh" start >&2
gw=127.0.0.1:$(cat "$run/gateway.port")
gw_pid=$(cat "$run/gateway.pid")
"$build/bin/bench_load" setup --addr "$gw" --key "$key" -n 1 --out "$work/one" >/dev/null
sid=$(head -1 "$work/one")

. "$here/nginx_conf.sh"
# cg_count PID OUT ADDR API CALL N LABEL: PID runs under callgrind (dumps to
# OUT*) and serves ADDR; warm it up, zero its counters, drive N calls at
# -c $conc, dump, and print the instructions per call (program total / N).
cg_count() {
  local pid=$1 out=$2 addr=$3 api=$4 c=$5 n=$6 label=$7 f total
  local auth=(); [ "$api" = gateway ] && auth=(--key "$key")
  for _ in $(seq 1 200); do
    "$build/bin/bench_load" run --addr "$addr" --api "$api" "${auth[@]}" --call "$c" --id "$sid" -c 1 --count 1 \
      >/dev/null 2>&1 && break
    sleep 0.1
  done
  "$build/bin/bench_load" run --addr "$addr" --api "$api" "${auth[@]}" --call "$c" --id "$sid" -c 16 --count 200 >/dev/null
  callgrind_control -z "$pid" >/dev/null 2>&1 || true
  "$build/bin/bench_load" run --addr "$addr" --api "$api" "${auth[@]}" --call "$c" --id "$sid" -c "$conc" --count "$n"
  callgrind_control -d "$pid" >/dev/null 2>&1 || true
  sleep 1
  f=$(ls -t "$out"* | head -1)
  total=$(callgrind_annotate "$f" 2>/dev/null | sed -n 's/^\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
  echo "instructions per call ($label, after reset): $((total / n))"
  cg_last=$f
}
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# nginx_count HOSTPORT N: nginx (master_process off: one process) under
# callgrind, forwarding N GetSandbox calls to the host.
nginx_count() {
  local nd=$work/nginx port
  port=$(free_port)
  nginx_conf "$nd" "$port" "127.0.0.1:$1" off
  valgrind --tool=callgrind --callgrind-out-file="$nd/cg.out" nginx -p "$nd" -e "$nd/logs/error.log" \
    -c "$nd/nginx.conf" >"$nd/vg.log" 2>&1 &
  ng_pid=$!
  cg_count "$ng_pid" "$nd/cg.out" "127.0.0.1:$port" host get "$2" "nginx grpc_pass"
  kill "$ng_pid" 2>/dev/null; wait "$ng_pid" 2>/dev/null || true
  ng_pid=""
}

# relay_count HOSTPORT N: bench_relay (the gateway's forward, no sandgate
# code) under callgrind, forwarding N GetSandbox calls to the host.
relay_count() {
  local port
  port=$(free_port)
  valgrind --tool=callgrind --callgrind-out-file="$work/relay.cg.out" "$build/bin/bench_relay" \
    --backend "127.0.0.1:$1" --listen "127.0.0.1:$port" >"$work/relay.vg.log" 2>&1 &
  rl_pid=$!
  cg_count "$rl_pid" "$work/relay.cg.out" "127.0.0.1:$port" host get "$2" "bare rpc relay, bench_relay"
  kill "$rl_pid" 2>/dev/null; wait "$rl_pid" 2>/dev/null || true
  rl_pid=""
}

if [ "$cg" = 1 ]; then
  # Restart the gateway under callgrind on the same config, then count.
  kill -TERM "$gw_pid"; sleep 0.5
  rm -f "$run/gateway.port"
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
    "$build/bin/sandgate" --config "$run/gateway.yaml" --listen 127.0.0.1:0 --port-file "$run/gateway.port" \
    >"$work/vg.log" 2>&1 &
  vg_pid=$!
  for _ in $(seq 1 200); do [ -s "$run/gateway.port" ] && break; sleep 0.1; done
  gw=127.0.0.1:$(cat "$run/gateway.port")
  n=5000
  cg_count "$vg_pid" "$work/cg.out" "$gw" gateway "$call" "$n" gateway
  # Inclusive: on this zeroed-then-dumped profile, callgrind_annotate 3.19's
  # self-cost list shows every instruction under clone() and nothing else.
  echo "== gateway, inclusive instructions, top 40 =="
  callgrind_annotate --inclusive=yes "$cg_last" 2>/dev/null | sed -n '/file:function/,$p' | sed -n 3,42p | cut -c1-160 || true
  [ -x "$build/bin/bench_relay" ] && relay_count "$(cat "$run/host.port")" "$n"
  if command -v nginx >/dev/null 2>&1; then
    nginx_count "$(cat "$run/host.port")" "$n"
  fi
  exit 0
fi

"$build/bin/bench_load" run --addr "$gw" --api gateway --call "$call" --key "$key" --id "$sid" -c "$conc" \
  --secs $((secs + 2)) --warmup 1 --cpu "gw=$gw_pid" >"$work/load.txt" &
lp=$!
sleep 1.5
perf record -q -g -e cpu-clock -F 2000 -p "$gw_pid" -o "$work/perf.data" -- sleep "$secs" >/dev/null 2>&1
wait "$lp"
cat "$work/load.txt"
echo "== top symbols, self time (gateway process, all threads) =="
perf report -i "$work/perf.data" --no-children --sort symbol --stdio 2>/dev/null | cut -c1-110 | grep -E '^ +[0-9]' | head -45 || true
echo "== by shared object =="
perf report -i "$work/perf.data" --no-children --sort dso --stdio 2>/dev/null | cut -c1-110 | grep -E '^ +[0-9]' | head -12 || true
echo "== by thread =="
perf report -i "$work/perf.data" --no-children --sort comm --stdio 2>/dev/null | cut -c1-110 | grep -E '^ +[0-9]' | head -12 || true
echo "== inclusive (children), top 40 =="
perf report -i "$work/perf.data" --children --sort symbol --stdio -g none 2>/dev/null | cut -c1-110 | grep -E '^ +[0-9]' | head -40 || true
