#!/usr/bin/env bash
# bench/run.sh — sandgate's benchmarks beside what users would pick instead,
# in one run on one machine (issue 7). Prints one table (each figure beside
# its target, MISSED where it misses) and writes it, with the machine and the
# exact command, to docs/benchmarks.md.
#
#   bench/run.sh [--smoke] [--build DIR] [--out FILE] [--only 1,2,3,4,5,6]
#                [--sandboxes N] [--secs S]
#
#   --smoke       a few-second version (CTest bench_smoke); writes to
#                 --out or a temp file, never to docs/; exits non-zero when a
#                 sandgate figure could not be measured or a call failed.
#   --build DIR   build directory with bin/ (default <repo>/build)
#   --only LIST   scenarios to run (default all): 1 create, 2 RunCode,
#                 3 gateway cost vs host and nginx, 4 scale, 5 policy,
#                 6 create with the embedded registry vs etcd
#                 (bench/registry_create.sh; needs etcd-server, etcd-client),
#                 7 the isolation drivers side by side: process and gvisor
#                 (create from a full warm pool, RunCode, a pandas groupby
#                 and an import action, idle PSS at 1/10/50 sandboxes, by
#                 process role; needs root and runsc, else its gvisor
#                 column is n/a)
#   --sandboxes N live sandboxes for scenario 4 (default 500)
#   --secs S      measured seconds per load point in scenarios 2 and 3
#   --reps R      scenario 3: runs per load point, gateway/host/nginx
#                 interleaved; the run with the median rate is reported
#                 (default 3; 1 in smoke mode)
#
# It starts its own host and gateway (deploy/local/run.sh, ephemeral ports,
# a bench policy with the rate and sandbox quotas lifted), and nginx from
# its own config and prefix in a temp dir (never the system service). On
# cgroup v1 as root the host gets a private cgroup root (bind mounts of
# <ctrl>/sgbench-<pid>), so another host starting on the machine (its
# stale-cgroup sweep) cannot kill the bench's sandboxes.
#
# Packages: nginx python3-ipykernel python3-jupyter-client bubblewrap
# (optional: what is missing is reported as n/a), linux-perf valgrind
# (profiling by hand).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cmdline="bench/run.sh${*:+ $*}"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)   # what else the machine was doing

smoke=0
build=$repo/build
out=""
only="1,2,3,4,5,6,7"
nsb=500
secs=""
reps=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1 ;;
    --build) build=$(cd "$2" && pwd); shift ;;
    --out) out=$2; shift ;;
    --only) only=$2; shift ;;
    --sandboxes) nsb=$2; shift ;;
    --secs) secs=$2; shift ;;
    --reps) reps=$2; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

bin=$build/bin
load=$bin/bench_load
py=/usr/bin/python3
export PYDEVD_DISABLE_FILE_VALIDATION=1
key=sg-demo-key-0001
[ -x "$load" ] || { echo "run.sh: $load not built (cmake --build $build)" >&2; exit 2; }

if [ "$smoke" = 1 ]; then
  : "${secs:=0.5}"; : "${reps:=1}"; warm=0.2; concs="1 16"; [ "$nsb" = 500 ] && nsb=5
  n_create=5; n_cold=1; n_kstart=1; n_kexec=20; n_bwrap=3; burst=$((nsb * 2)); burst_total=$burst
  policy_rules=1000
  iso_create=2; iso_actions=1; iso_counts="1"; iso_gv_pool=1
else
  : "${secs:=4}"; : "${reps:=3}"; warm=1; concs="1 16 64 256"
  n_create=200; n_cold=5; n_kstart=10; n_kexec=200; n_bwrap=50; burst=1000; burst_total=3000
  policy_rules=10000
  iso_create=30; iso_actions=5; iso_counts="1 10 50"; iso_gv_pool=""   # deploy/local's
fi
want() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

work=$(mktemp -d /tmp/sgbench.XXXXXX)
run=$work/run
mkdir -p "$run"
[ -n "${BENCH_NOTE:-}" ] && notes+=("$BENCH_NOTE")   # e.g. where the build came from
failed=0          # smoke: a sandgate figure could not be measured
rows=()           # "scenario|figure|measured|target|status"
notes=()

say() { echo "run.sh: $*" >&2; }
kv() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1" | head -1; }
# awk helpers: fmt NUMBER DECIMALS, le A B (A <= B), ratio A B
fmt() { awk -v x="$1" -v d="$2" 'BEGIN { if (x == "") print "n/a"; else printf "%.*f", d, x }'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 <= b + 0) }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 < b + 0) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print ""; else printf "%.2f", a / b }'; }
row() { rows+=("$1|$2|$3|$4|$5"); }
# check MEASURED TARGET_TEXT OP LIMIT: status ok / MISSED / n/a
check() {
  local m=$1 op=$2 lim=$3
  if [ -z "$m" ] || [ "$m" = n/a ]; then echo "n/a"; return; fi
  case $op in
    le) le "$m" "$lim" && echo ok || echo MISSED ;;
    ge) le "$lim" "$m" && echo ok || echo MISSED ;;
    lt) lt "$m" "$lim" && echo ok || echo MISSED ;;
    eq) awk -v a="$m" -v b="$lim" 'BEGIN { exit !(a + 0 == b + 0) }' && echo ok || echo MISSED ;;
  esac
}

# ---- private cgroup root (v1, root) -------------------------------------
cg_root=/sys/fs/cgroup
cg_mounted=()
cg_name=sgbench-$$
if [ "$(id -u)" = 0 ] && [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
  ok=1
  for c in memory pids cpu freezer; do
    [ -d /sys/fs/cgroup/$c ] || continue
    mkdir -p "/sys/fs/cgroup/$c/$cg_name" "$work/cg/$c" 2>/dev/null &&
      mount --bind "/sys/fs/cgroup/$c/$cg_name" "$work/cg/$c" 2>/dev/null &&
      cg_mounted+=("$c") || { ok=0; break; }
  done
  if [ "$ok" = 1 ]; then cg_root=$work/cg; else
    for c in "${cg_mounted[@]}"; do umount "$work/cg/$c"; rmdir "/sys/fs/cgroup/$c/$cg_name"; done
    cg_mounted=(); notes+=("The host used the machine's cgroup root (a private one could not be mounted).")
  fi
fi
cg_pids_dir() {   # where <id>/cgroup.procs live
  if [ -d "$cg_root/pids" ]; then echo "$cg_root/pids/sandgate"; else echo "$cg_root/sandgate"; fi
}

nginx_pid=""
relay_pid=""
cleanup() {
  set +e
  [ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null
  if [ -n "$nginx_pid" ] && kill -0 "$nginx_pid" 2>/dev/null; then
    kill -QUIT "$nginx_pid"; for _ in $(seq 1 50); do kill -0 "$nginx_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$nginx_pid" 2>/dev/null && kill -KILL "$nginx_pid"
  fi
  SANDGATE_RUN_DIR=$run "$repo/deploy/local/run.sh" stop >/dev/null 2>&1
  for c in "${cg_mounted[@]}"; do
    umount "$work/cg/$c" 2>/dev/null
    real=/sys/fs/cgroup/$c/$cg_name
    for d in "$real"/sandgate/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
    rmdir "$real/sandgate" "$real" 2>/dev/null
  done
  [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

# ---- daemons ------------------------------------------------------------
cat >"$work/policy.yaml" <<'YAML'
# bench policy: deploy/local's tenant with the rate and sandbox quotas lifted
version: 1
defaults:
  limits:
    action_timeout: 30s
    ttl: 3600s
    ttl_max: 3600s
    output_bytes: 64KiB
    memory: 512MiB
    pids: 128
    cpu_millis: 1000
    disk: 256MiB
  quotas:
    sandboxes_per_tenant: 1000000
    sandboxes_per_user: 1000000
    concurrent_actions: 1000000
    rate_per_s: 1000000
    rate_burst: 1000000
templates:
  - name: code-interpreter
  - name: code-interpreter-gvisor
tenants:
  - id: demo
    api_keys:
      - 5b9862fde34fbb0c04a2ce55ee9a4810454901c6a8ce9a1c1bf6ce28d3e77185
    templates: [code-interpreter, code-interpreter-gvisor]
YAML
mkdir -p "$work/rt"
sed -e "s|^runtime_dir:.*|runtime_dir: $work/rt|" -e "s|^cgroup_root:.*|cgroup_root: $cg_root|" \
    -e "s|^uid_base:.*|uid_base: 400000|" -e "s|^name:.*|name: bench|" \
    "$repo/deploy/local/host.yaml" >"$work/host.yaml"
# Scenario 7 runs deploy/local's code-interpreter-gvisor beside the process
# template (added from the process one if deploy/local has none; smoke mode:
# pool 1, a gVisor pool sandbox is seconds of CPU to warm). Without scenario
# 7, the process template only (tests/drivers.py): no gVisor pool warming.
gv_tpl=code-interpreter-gvisor
gv_why=""
if ! want 7; then gv_why="not asked for"
elif [ "$(id -u)" != 0 ]; then gv_why="needs root"
elif [ ! -x /usr/bin/runsc ]; then gv_why="runsc missing (deploy/packages.txt)"
fi
if [ -n "$gv_why" ]; then
  SANDGATE_TEST_DRIVER=process /usr/bin/python3 "$repo/tests/drivers.py" "$work/host.yaml"
else
  "$py" - "$work/host.yaml" "$gv_tpl" "$iso_gv_pool" <<'PY'
import re, sys
path, name, pool = sys.argv[1:]
lines = open(path).read().splitlines(keepends=True)
def item(n):
    s = next((i for i, l in enumerate(lines) if l.strip() == "- name: " + n), None)
    if s is None:
        return None, None
    e = s + 1
    while e < len(lines) and (lines[e].startswith("    ") or not lines[e].strip()):
        e += 1
    return s, e
s, e = item(name)
if s is None:   # the process template's item, renamed, isolation gvisor
    ps, pe = item("code-interpreter")
    new = [l for l in lines[ps:pe] if not l.lstrip().startswith(("pool:", "isolation:"))]
    new[0] = new[0].replace("code-interpreter", name)
    if not new[-1].endswith("\n"):
        new[-1] += "\n"
    new += ["    isolation: gvisor\n", "    pool: %s\n" % (pool or "2")]
    lines[pe:pe] = new
elif pool:
    for i in range(s, e):
        if lines[i].lstrip().startswith("pool:"):
            lines[i] = re.sub(r"pool:\s*\d+", "pool: " + pool, lines[i])
open(path, "w").write("".join(lines))
PY
fi
pool_in() { awk -v t="$1" '$0 ~ "- name: "t"$" {f=1; next} f && /^  - name:/ {f=0} f && /pool:/ {print $2; exit}' "$work/host.yaml"; }
pr_pool=$(pool_in code-interpreter); pr_pool=${pr_pool:-4}
gv_pool=$(pool_in "$gv_tpl"); gv_pool=${gv_pool:-2}

SANDGATE_BUILD=$build SANDGATE_RUN_DIR=$run SANDGATE_PORT=0 SANDGATE_HOST_PORT=0 \
  SANDGATE_POLICY=$work/policy.yaml SANDGATE_HOST_CONFIG=$work/host.yaml \
  "$repo/deploy/local/run.sh" start >&2
gw=127.0.0.1:$(cat "$run/gateway.port")
host=127.0.0.1:$(cat "$run/host.port")
gw_pid=$(cat "$run/gateway.pid")
host_pid=$(cat "$run/host.pid")

hm=127.0.0.1:$(cat "$run/host-metrics.port" 2>/dev/null || echo 0)
pool_of() {   # TEMPLATE: warm sandboxes on the host's /metrics
  "$py" - "$hm" "$1" <<'PY' 2>/dev/null || echo 0
import sys, urllib.request
hp, t = sys.argv[1:]
for l in urllib.request.urlopen("http://%s/metrics" % hp, timeout=5).read().decode().splitlines():
    if l.startswith('sandgate_host_warm_pool{template="%s"' % t):
        print(int(float(l.rsplit(" ", 1)[1]))); break
else:
    print(0)
PY
}
wait_pool() {   # TEMPLATE MIN SECS: 0 when the pool holds MIN
  local end=$((SECONDS + $3))
  while [ "$SECONDS" -lt "$end" ]; do
    [ "$(pool_of "$1")" -ge "$2" ] && return 0
    sleep 0.5
  done
  return 1
}
# A gvisor pool warms for tens of seconds of CPU: let it finish before
# anything is measured, so it perturbs no process-driver figure.
if [ -z "$gv_why" ]; then
  wait_pool "$gv_tpl" "$gv_pool" 300 || say "the gvisor pool is not full after 300 s; going on"
fi

# One sandbox for the RunCode and GetSandbox load.
"$load" setup --addr "$gw" --key "$key" -n 1 --out "$work/one" >/dev/null || { say "cannot create a sandbox"; exit 1; }
sid=$(head -1 "$work/one")

loadrun() {   # args...: prints the RESULT line ("" on failure)
  local line
  line=$("$load" run "$@" 2>>"$work/load.err") || { say "bench_load $* failed"; tail -3 "$work/load.err" >&2; echo ""; return 0; }
  echo "$line"
}
# median_run LINE...: the RESULT line whose rate is the median (lower middle)
median_run() {
  printf '%s\n' "$@" | grep RESULT | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^rate=/) {split($i, a, "="); print a[2], $0}}' |
    sort -g | awk '{l[NR] = $0} END {if (NR) {sub(/^[^ ]* /, "", l[int((NR + 1) / 2)]); print l[int((NR + 1) / 2)]}}'
}
# rate_range LINE...: "min–max" of the rates
rate_range() {
  printf '%s\n' "$@" | sed -n 's/.* rate=\([^ ]*\).*/\1/p' | sort -g | awk 'NR == 1 {a = $1} {b = $1} END {if (NR) printf "%.0f–%.0f", a, b}'
}
have() { command -v "$1" >/dev/null 2>&1; }
. "$here/nginx_conf.sh"
have_jupyter() { "$py" -c 'import jupyter_client, ipykernel' 2>/dev/null; }

# ---- 1. create ----------------------------------------------------------
if want 1; then
  say "1: create"
  if [ -x "$bin/bench_create" ]; then
    cr=$("$bin/bench_create" --addr "$gw" --key "$key" -n "$n_create" --mode b2b --cold "$n_cold" 2>>"$work/create.err" || true)
    c_line=$(grep -m1 '^create, ' <<<"$cr" || true)
    cold_line=$(grep -m1 '^cold ' <<<"$cr" || true)
    c50=$(sed -n 's/.* p50 \([0-9.]*\) ms.*/\1/p' <<<"$c_line"); c99=$(sed -n 's/.* p99 \([0-9.]*\) ms.*/\1/p' <<<"$c_line")
    cn=$(sed -n 's/.* n=\([0-9]*\) .*/\1/p' <<<"$c_line")
    cold50=$(sed -n 's/.* p50 \([0-9.]*\) ms.*/\1/p' <<<"$cold_line")
    [ -n "$c50" ] || { say "bench_create gave no figure"; cat "$work/create.err" >&2; failed=1; }
    row 1 "create through the gateway, p50 (n=${cn:-0}, zygote)" "$(fmt "$c50" 1) ms" "≤ 15 ms" "$(check "$c50" le 15)"
    row 1 "create through the gateway, p99" "$(fmt "$c99" 1) ms" "≤ 40 ms" "$(check "$c99" le 40)"
    row 1 "cold: python3 + import numpy, pandas, p50 (n=$n_cold)" "$(fmt "$cold50" 1) ms" "compare" ""
  else
    row 1 "create through the gateway" "n/a (bench_create not built)" "≤ 15 / 40 ms" "n/a"
  fi
  if have_jupyter; then
    ks=$("$py" "$here/compare.py" kernel-start "$n_kstart" 2>>"$work/compare.err" | grep RESULT || true)
    row 1 "Jupyter kernel start (ipykernel, jupyter_client), p50 (n=$n_kstart)" "$(fmt "$(kv "$ks" p50_ms)" 1) ms" "compare" ""
  else
    row 1 "Jupyter kernel start" "n/a (python3-ipykernel / python3-jupyter-client missing)" "compare" ""
  fi
  if have bwrap; then
    bw=$("$py" "$here/compare.py" bwrap "$n_bwrap" 2>>"$work/compare.err" | grep RESULT || true)
    row 1 "bwrap --unshare-all python3 -c pass, p50 (n=$n_bwrap)" "$(fmt "$(kv "$bw" p50_ms)" 1) ms" "compare" ""
  else
    row 1 "bwrap --unshare-all python3 -c pass" "n/a (bubblewrap missing)" "compare" ""
  fi
fi

# ---- 2. RunCode x=1+1 ---------------------------------------------------
if want 2; then
  say "2: RunCode x=1+1"
  r=$(loadrun --addr "$gw" --api gateway --call run --key "$key" --id "$sid" -c 1 --secs "$secs" --warmup "$warm")
  [ -n "$r" ] && [ "$(kv "$r" errors)" = 0 ] || failed=1
  p50=$(awk -v x="$(kv "$r" p50_us)" 'BEGIN { if (x != "") print x / 1000 }')
  p99=$(awk -v x="$(kv "$r" p99_us)" 'BEGIN { if (x != "") print x / 1000 }')
  row 2 "RunCode x=1+1 through the gateway, p50 (n=$(kv "$r" calls))" "$(fmt "$p50" 3) ms" "≤ 0.5 ms" "$(check "$p50" le 0.5)"
  row 2 "RunCode x=1+1 through the gateway, p99" "$(fmt "$p99" 3) ms" "≤ 2 ms" "$(check "$p99" le 2)"
  r=$(loadrun --addr "$host" --api host --call run --id "$sid" -c 1 --secs "$secs" --warmup "$warm")
  [ -n "$r" ] && [ "$(kv "$r" errors)" = 0 ] || failed=1
  row 2 "RunCode x=1+1 directly to the host, p50 / p99" \
    "$(fmt "$(awk -v x="$(kv "$r" p50_us)" 'BEGIN{if(x!="")print x/1000}')" 3) / $(fmt "$(awk -v x="$(kv "$r" p99_us)" 'BEGIN{if(x!="")print x/1000}')" 3) ms" "compare" ""
  if have_jupyter; then
    ke=$("$py" "$here/compare.py" kernel-exec "$n_kexec" 2>>"$work/compare.err" | grep RESULT || true)
    row 2 "Jupyter kernel execute x=1+1, p50 / p99 (n=$n_kexec)" "$(fmt "$(kv "$ke" p50_ms)" 3) / $(fmt "$(kv "$ke" p99_ms)" 3) ms" "~7 ms p50" ""
  else
    row 2 "Jupyter kernel execute x=1+1" "n/a (jupyter missing)" "~7 ms p50" ""
  fi
fi

# ---- 3. gateway cost ----------------------------------------------------
start_nginx() {
  have nginx || return 1
  local nd=$work/nginx port
  port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  nginx_conf "$nd" "$port" "$host" on
  nginx -p "$nd" -e "$nd/logs/error.log" -c "$nd/nginx.conf" >"$nd/logs/stderr" 2>&1 &
  nginx_pid=$!
  for _ in $(seq 1 100); do
    [ -n "$(ps -o pid= --ppid "$nginx_pid" 2>/dev/null)" ] && break
    kill -0 "$nginx_pid" 2>/dev/null || { cat "$nd/logs/stderr" "$nd/logs/error.log" >&2; nginx_pid=""; return 1; }
    sleep 0.05
  done
  nginx_addr=127.0.0.1:$port
  nginx_pids=$(echo "$nginx_pid" $(ps -o pid= --ppid "$nginx_pid") | tr ' ' '+' | sed 's/++*/+/g')
}

# bench_relay: the same forward as the gateway's with none of sandgate's code,
# so the table shows what two C-core legs cost apart from auth and policy.
start_relay() {
  [ -x "$bin/bench_relay" ] || return 1
  "$bin/bench_relay" --backend "$host" --port-file "$work/relay.port" 2>>"$work/relay.err" &
  relay_pid=$!
  for _ in $(seq 1 100); do
    [ -s "$work/relay.port" ] && { relay_addr=127.0.0.1:$(cat "$work/relay.port"); return 0; }
    kill -0 "$relay_pid" 2>/dev/null || { cat "$work/relay.err" >&2; relay_pid=""; return 1; }
    sleep 0.05
  done
  return 1
}
# cpu_sum LINE: "client+proxy+host=total" µs per call
cpu_sum() {
  local c p h
  c=$(kv "$1" cpu_client_us); p=$(kv "$1" cpu_proxy_us); h=$(kv "$1" cpu_host_us)
  [ -n "$c" ] || { echo n/a; return; }
  echo "$(fmt "$c" 0)+$(fmt "${p:-0}" 0)+$(fmt "$h" 0)=$(fmt "$(awk -v a="$c" -v b="${p:-0}" -v d="$h" 'BEGIN{print a+b+d}')" 0)"
}

if want 3; then
  say "3: gateway cost (GetSandbox)"
  nginx_ok=0; relay_ok=0
  start_nginx && nginx_ok=1 || say "nginx not available: the nginx column is n/a"
  start_relay && relay_ok=1 || { say "bench_relay did not start: its column is n/a"; failed=1; }
  best_gw=0
  for c in $concs; do
    conns=1
    # Interleaved repetitions: drift on this shared machine hits all four paths alike.
    gs=(); hs=(); ns=(); rs=()
    for _ in $(seq 1 "$reps"); do
      g=$(loadrun --addr "$gw" --api gateway --call get --key "$key" --id "$sid" -c "$c" --secs "$secs" --warmup "$warm" \
          --cpu "proxy=$gw_pid,host=$host_pid")
      h=$(loadrun --addr "$host" --api host --call get --id "$sid" -c "$c" --secs "$secs" --warmup "$warm" --cpu "host=$host_pid")
      for x in "$g" "$h"; do [ -n "$x" ] && [ "$(kv "$x" errors)" = 0 ] || failed=1; done
      gs+=("$g"); hs+=("$h")
      if [ "$relay_ok" = 1 ]; then
        r=$(loadrun --addr "$relay_addr" --api host --call get --id "$sid" -c "$c" --secs "$secs" --warmup "$warm" \
            --cpu "proxy=$relay_pid,host=$host_pid")
        [ -n "$r" ] && [ "$(kv "$r" errors)" = 0 ] || failed=1
        rs+=("$r")
      fi
      if [ "$nginx_ok" = 1 ]; then
        ns+=("$(loadrun --addr "$nginx_addr" --api host --call get --id "$sid" -c "$c" --secs "$secs" --warmup "$warm" \
            --cpu "proxy=$nginx_pids,host=$host_pid")")
      fi
    done
    g=$(median_run "${gs[@]}"); h=$(median_run "${hs[@]}"); n=""; rl=""
    [ "$nginx_ok" = 1 ] && n=$(median_run "${ns[@]}")
    [ "$relay_ok" = 1 ] && rl=$(median_run "${rs[@]}")
    [ "$reps" -gt 1 ] && notes+=("c=$c calls/s over $reps runs: gateway $(rate_range "${gs[@]}"), host $(rate_range "${hs[@]}")$([ "$relay_ok" = 1 ] && echo ", bare relay $(rate_range "${rs[@]}")")$([ "$nginx_ok" = 1 ] && echo ", nginx $(rate_range "${ns[@]}")")")
    printf '%s\n' "$g" "$h" "$rl" "$n" >>"$work/s3.txt"
    gr=$(kv "$g" rate); nr=$(kv "$n" rate); hr=$(kv "$h" rate)
    lt "$best_gw" "${gr:-0}" && best_gw=$gr
    rt=$(ratio "$gr" "$nr")
    row 3 "c=$c gateway: calls/s, p50 / p99 µs" "$(fmt "$gr" 0) /s, $(fmt "$(kv "$g" p50_us)" 0) / $(fmt "$(kv "$g" p99_us)" 0)" "" ""
    row 3 "c=$c host direct: calls/s, p50 / p99 µs" "$(fmt "$hr" 0) /s, $(fmt "$(kv "$h" p50_us)" 0) / $(fmt "$(kv "$h" p99_us)" 0)" "" ""
    if [ -n "$rl" ]; then
      row 3 "c=$c bare rpc relay (bench_relay: no auth, no policy): calls/s, p50 / p99 µs" \
        "$(fmt "$(kv "$rl" rate)" 0) /s, $(fmt "$(kv "$rl" p50_us)" 0) / $(fmt "$(kv "$rl" p99_us)" 0)" "" ""
    fi
    if [ -n "$n" ]; then
      row 3 "c=$c nginx grpc_pass: calls/s, p50 / p99 µs" "$(fmt "$nr" 0) /s, $(fmt "$(kv "$n" p50_us)" 0) / $(fmt "$(kv "$n" p99_us)" 0)" "" ""
      row 3 "c=$c gateway / nginx calls/s" "$(fmt "$rt" 2)×" "≥ 1.5×" "$(check "$rt" ge 1.5)"
      [ -n "$rl" ] && row 3 "c=$c bare relay / nginx calls/s (the same two C-core legs, no sandgate code)" \
        "$(fmt "$(ratio "$(kv "$rl" rate)" "$nr")" 2)×" "compare" ""
      row 3 "c=$c gateway p50 below nginx p50" "$(fmt "$(kv "$g" p50_us)" 0) vs $(fmt "$(kv "$n" p50_us)" 0) µs" "gateway < nginx" \
        "$(check "$(kv "$g" p50_us)" lt "$(kv "$n" p50_us)")"
    else
      row 3 "c=$c nginx grpc_pass" "n/a (nginx missing)" "" ""
      row 3 "c=$c gateway / nginx calls/s" "n/a" "≥ 1.5×" "n/a"
    fi
    row 3 "c=$c CPU µs/call (client + proxy + host): gateway / bare relay / host direct / nginx" \
      "$(cpu_sum "$g") / $(cpu_sum "$rl") / $(cpu_sum "$h") / $(cpu_sum "$n")" "" ""
  done
  row 3 "gateway calls/s, best of c=${concs// //}" "$(fmt "$best_gw" 0) /s" "≥ 24,000 /s" "$(check "$best_gw" ge 24000)"
fi

# ---- 4. scale -----------------------------------------------------------
if want 4; then
  say "4: scale: $nsb live sandboxes, $burst concurrent RunCode"
  pid_max=$(cat /proc/sys/kernel/pid_max); mem_kib=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
  su=$("$load" setup --addr "$gw" --key "$key" -n "$nsb" --out "$work/ids" 2>>"$work/load.err" | grep RESULT || true)
  made=$(kv " $su" made)
  [ "${made:-0}" -gt 0 ] || { say "scale setup made no sandbox"; failed=1; made=0; }
  if [ "${made:-0}" -lt "$nsb" ]; then
    notes+=("Scale: only $made of $nsb sandboxes could be created (pid_max $pid_max, MemAvailable $((mem_kib / 1024)) MiB before); the figures are for $made. First errors: $(grep -m3 'create' "$work/load.err" | tr '\n' ' ')")
  fi
  if [ "${made:-0}" -gt 0 ]; then
    sleep 2   # let pool refills and context start-up settle
    ps_line=$("$py" "$here/compare.py" sandbox-pss "$(cg_pids_dir)" "$work/ids" 2>>"$work/compare.err" | grep RESULT || true)
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$host_pid/status")
    b=$(loadrun --addr "$gw" --api gateway --call run --key "$key" --ids "$work/ids" -c "$burst" --count "$burst_total" --timeout 60)
    errs=$(kv "$b" errors)
    [ -n "$b" ] && [ "$errs" = 0 ] || failed=1
    rss2=$(awk '/VmRSS/ {print $2}' "/proc/$host_pid/status")
    row 4 "live sandboxes held" "$made" "$nsb" "$(check "$made" ge "$nsb")"
    row 4 "$burst concurrent RunCode (total $(kv "$b" calls)): errors" "$(fmt "$errs" 0)" "0" "$(check "$errs" eq 0)"
    row 4 "… p50 / p99" "$(fmt "$(awk -v x="$(kv "$b" p50_us)" 'BEGIN{if(x!="")print x/1000}')" 1) / $(fmt "$(awk -v x="$(kv "$b" p99_us)" 'BEGIN{if(x!="")print x/1000}')" 1) ms ($(fmt "$(kv "$b" rate)" 0) calls/s)" "" ""
    row 4 "host daemon RSS, idle / after the burst" "$(fmt "$(awk -v x="$rss" 'BEGIN{print x/1024}')" 1) / $(fmt "$(awk -v x="$rss2" 'BEGIN{print x/1024}')" 1) MiB" "" ""
    mean=$(kv "$ps_line" mean_mib)
    row 4 "idle PSS per sandbox, mean (median / max; procs per sandbox)" \
      "$(fmt "$mean" 2) MiB ($(fmt "$(kv "$ps_line" median_mib)" 2) / $(fmt "$(kv "$ps_line" max_mib)" 2); $(kv "$ps_line" procs_per_sandbox))" "≤ 10 MiB" "$(check "$mean" le 10)"
    # How many idle sandboxes fit: by what they use (memory available before
    # the scale run ÷ mean PSS), by what the default limits let each one take
    # (MemTotal ÷ the policy's 512 MiB memory limit, 128 pids of pid_max),
    # and the host's own cap (deploy/local/host.yaml max_sandboxes).
    mem_total_kib=$(awk '/MemTotal/ {print $2}' /proc/meminfo)
    max_sb=$(awk '/^max_sandboxes:/ {print $2}' "$repo/deploy/local/host.yaml")
    fit_use=$(awk -v a="$mem_kib" -v m="$mean" 'BEGIN{if (m > 0) printf "%d", a / 1024 / m}')
    fit_lim=$(awk -v t="$mem_total_kib" -v p="$pid_max" 'BEGIN{a = int(t / 1024 / 512); b = int(p / 128); printf "%d", (a < b ? a : b)}')
    row 4 "idle sandboxes that fit: by use (MemAvailable ÷ PSS) / at the default limits (512 MiB, 128 pids each, not overcommitted) / host cap" \
      "$(fmt "$fit_use" 0) / $(fmt "$fit_lim" 0) / ${max_sb:-n/a}" "" ""
    "$load" teardown --addr "$gw" --key "$key" --ids "$work/ids" >/dev/null 2>&1 || true
  fi
fi

# ---- 5. policy ----------------------------------------------------------
if want 5; then
  say "5: policy ($policy_rules rules)"
  pb=$build/policy/policy_bench
  if [ -x "$pb" ]; then
    po=$("$pb" "$policy_rules" 2>&1 || true)
    # worst load over both shapes; worst and auth decision times
    ld=$(sed -n 's/.*load best of [0-9]* \([0-9.]*\) ms.*/\1/p' <<<"$po" | sort -g | tail -1)
    dmax=$(sed -n 's/.* \([0-9]*\) ns\/decision.*/\1/p' <<<"$po" | sort -g | tail -1)
    dauth=$(grep 'auth by api key' <<<"$po" | sed -n 's/.* \([0-9]*\) ns\/decision.*/\1/p' | sort -g | tail -1)
    dcreate=$(grep 'create (template' <<<"$po" | sed -n 's/.* \([0-9]*\) ns\/decision.*/\1/p' | sort -g | tail -1)
    row 5 "load a $policy_rules-rule policy (worst of 2 shapes, best of 5 loads)" "$(fmt "$ld" 1) ms" "< 1 s (policy budget)" "$(check "$ld" lt 1000)"
    row 5 "decision: auth by API key / create" "$(fmt "$dauth" 0) / $(fmt "$dcreate" 0) ns" "" ""
    row 5 "decision, slowest kind (egress CIDR or name+ip)" "$(fmt "$dmax" 0) ns" "< 50 µs (policy budget)" "$(check "$dmax" lt 50000)"
  else
    row 5 "policy" "n/a (policy_bench not built)" "" "n/a"
  fi
fi

# ---- 6. registry: embedded vs etcd --------------------------------------
if want 6; then
  say "6: create, embedded registry vs etcd"
  if command -v etcd >/dev/null 2>&1 && command -v etcdctl >/dev/null 2>&1; then
    if [ "$smoke" = 1 ]; then rn=5; rr=1; else rn=100; rr=3; fi
    rg=$("$here/registry_create.sh" --build "$build" -n "$rn" --reps "$rr" --policy "$work/policy.yaml" 2>>"$work/registry.err" || true)
    for m in embedded etcd; do
      l=$(grep "mode=$m " <<<"$rg" || true)
      [ -n "$l" ] || { say "registry_create.sh gave no $m figure"; cat "$work/registry.err" >&2; failed=1; }
      row 6 "create, $m mode, p50 / p99 (n=$(kv "$l" n), alternating runs, one host)" \
        "$(fmt "$(kv "$l" p50_ms)" 1) / $(fmt "$(kv "$l" p99_ms)" 1) ms" "$([ $m = etcd ] && echo '≤ 15 / 40 ms' || echo compare)" \
        "$([ $m = etcd ] && { a=$(check "$(kv "$l" p50_ms)" le 15); b=$(check "$(kv "$l" p99_ms)" le 40); [ "$a$b" = okok ] && echo ok || echo MISSED; })"
    done
  else
    row 6 "create, embedded vs etcd mode" "n/a (etcd-server / etcd-client missing)" "≤ 15 / 40 ms" "n/a"
  fi
fi

# ---- 7. isolation drivers side by side -----------------------------------
# Each figure says the 1-minute load average when it was taken: on this
# shared 2-core machine it moves the figures more than anything in them.
GROUPBY="import pandas as pd
df = pd.DataFrame({'k': [i % 10 for i in range(10000)], 'v': range(10000)})
df.groupby('k').v.sum().iloc[0]"
IMPORTS="import json, csv, re"
loadavg() { cut -d' ' -f1 /proc/loadavg; }
ms_of() { awk -v x="$(kv "$1" "$2")" 'BEGIN { if (x != "") print x / 1000 }'; }
# setup_n TEMPLATE N FILE: N more sandboxes of TEMPLATE appended to FILE,
# made by 4 clients at once (a gVisor sandbox past the pool is a cold
# start: seconds of CPU under ptrace). Returns non-zero if any is missing.
setup_n() {
  local t=$1 n=$2 f=$3 k per rest pids=()
  [ "$n" -gt 0 ] || return 0
  per=$(((n + 3) / 4))
  for k in 0 1 2 3; do
    rest=$((n - k * per)); [ "$rest" -gt "$per" ] && rest=$per
    [ "$rest" -gt 0 ] || break
    "$load" setup --addr "$gw" --key "$key" --template "$t" -n "$rest" --out "$f.part$k" >>"$work/iso.err" 2>&1 &
    pids+=($!)
  done
  local bad=0
  for k in "${pids[@]}"; do wait "$k" || bad=1; done
  cat "$f".part* >>"$f" 2>/dev/null; rm -f "$f".part*
  return $bad
}
iso_run() {   # DRIVER TEMPLATE POOL
  local d=$1 t=$2 pool=$3 cr c50 c99 r a ids=$work/iso-$1.ids
  # create: every create from a full pool (the host's /metrics), then kill
  cr=$("$bin/bench_create" --addr "$gw" --key "$key" --template "$t" -n "$iso_create" --mode b2b \
       --pool-metrics "$hm" --pool-min "$pool" 2>>"$work/iso.err" || true)
  c_line=$(grep -m1 '^create, ' <<<"$cr" || true)
  c50=$(sed -n 's/.* p50 \([0-9.]*\) ms.*/\1/p' <<<"$c_line"); c99=$(sed -n 's/.* p99 \([0-9.]*\) ms.*/\1/p' <<<"$c_line")
  [ -n "$c50" ] || { say "7: $d: bench_create gave no figure"; tail -3 "$work/iso.err" >&2; failed=1; }
  iso_cr[$d]="$(fmt "$c50" 1) / $(fmt "$c99" 1) ms (n=$(sed -n 's/.* n=\([0-9]*\) .*/\1/p' <<<"$c_line"), load $(loadavg))"
  iso_c50[$d]=$c50; iso_c99[$d]=$c99
  # RunCode x=1+1 on one sandbox, through the gateway and to the host
  : >"$ids"
  setup_n "$t" 1 "$ids" || failed=1
  local one; one=$(head -1 "$ids")
  if [ -n "$one" ]; then
    # a fresh sandbox's first runs are not the steady state: one second's warm-up
    r=$(loadrun --addr "$gw" --api gateway --call run --key "$key" --id "$one" -c 1 --secs "$secs" --warmup 1)
    [ -n "$r" ] && [ "$(kv "$r" errors)" = 0 ] && [ "$(kv "$r" calls)" -gt 0 ] || { failed=1; r=""; }
    iso_r50[$d]=$(ms_of "$r" p50_us); iso_r99[$d]=$(ms_of "$r" p99_us)
    iso_rc[$d]="$(fmt "${iso_r50[$d]}" 3) / $(fmt "${iso_r99[$d]}" 3) ms (n=$(kv "$r" calls), load $(loadavg))"
    r=$(loadrun --addr "$host" --api host --call run --id "$one" -c 1 --secs "$secs" --warmup "$warm")
    [ -n "$r" ] && [ "$(kv "$r" errors)" = 0 ] && [ "$(kv "$r" calls)" -gt 0 ] || { failed=1; r=""; }
    iso_rh[$d]="$(fmt "$(ms_of "$r" p50_us)" 3) / $(fmt "$(ms_of "$r" p99_us)" 3) ms (load $(loadavg))"
  fi
  "$load" teardown --addr "$gw" --key "$key" --ids "$ids" >/dev/null 2>&1 || true
  # actions: the first run of each in a fresh sandbox (one call per
  # sandbox, round-robin), then the groupby again in the same sandboxes
  : >"$ids"
  setup_n "$t" "$iso_actions" "$ids" || failed=1
  if [ -s "$ids" ]; then
    local na; na=$(wc -l <"$ids")
    a=$(loadrun --addr "$gw" --api gateway --call run --key "$key" --ids "$ids" -c 1 --count "$na" --code "$IMPORTS")
    [ -n "$a" ] && [ "$(kv "$a" errors)" = 0 ] || failed=1
    iso_imp[$d]="$(fmt "$(ms_of "$a" p50_us)" 1) ms (n=$na, load $(loadavg))"
    a=$(loadrun --addr "$gw" --api gateway --call run --key "$key" --ids "$ids" -c 1 --count "$na" --code "$GROUPBY")
    [ -n "$a" ] && [ "$(kv "$a" errors)" = 0 ] || failed=1
    iso_gb1[$d]="$(fmt "$(ms_of "$a" p50_us)" 1) ms"
    a=$(loadrun --addr "$gw" --api gateway --call run --key "$key" --ids "$ids" -c 1 --count "$((na * 4))" --code "$GROUPBY")
    [ -n "$a" ] && [ "$(kv "$a" errors)" = 0 ] || failed=1
    iso_gb[$d]="${iso_gb1[$d]} / $(fmt "$(ms_of "$a" p50_us)" 1) ms (n=$na / $((na * 4)), load $(loadavg))"
  fi
  "$load" teardown --addr "$gw" --key "$key" --ids "$ids" >/dev/null 2>&1 || true
  # idle PSS at each count: sandboxes that ran x=1+1 once and went idle
  : >"$ids"
  local have=0 k p
  for k in $iso_counts; do
    setup_n "$t" "$((k - have))" "$ids" || failed=1
    have=$(wc -l <"$ids")
    [ "$have" -gt 0 ] || break
    loadrun --addr "$gw" --api gateway --call run --key "$key" --ids "$ids" -c 4 --count "$have" >/dev/null
    wait_pool "$t" "$pool" 120 || true   # refills done: nothing of ours is starting
    sleep 2
    p=$("$py" "$here/compare.py" sandbox-pss "$(cg_pids_dir)" "$ids" 2>>"$work/compare.err" | grep RESULT || true)
    [ "$(kv " $p" n)" = "$have" ] || failed=1
    iso_pss[$d.$k]=$(kv " $p" mean_mib)
    iso_pss_txt[$d.$k]="$(fmt "$(kv " $p" mean_mib)" 1) MiB (n=$have; $(kv " $p" roles | sed 's/,/, /g; s/:/ /g'); file pages $(fmt "$(kv " $p" file_mib)" 1); load $(loadavg))"
  done
  "$load" teardown --addr "$gw" --key "$key" --ids "$ids" >/dev/null 2>&1 || true
}
if want 7; then
  say "7: isolation drivers side by side"
  declare -A iso_cr iso_c50 iso_c99 iso_rc iso_r50 iso_r99 iso_rh iso_imp iso_gb1 iso_gb iso_pss iso_pss_txt
  drivers="process"
  if [ -z "$gv_why" ]; then
    if wait_pool "$gv_tpl" 1 300; then drivers="process gvisor"
    else gv_why="no gvisor pool sandbox became ready in 300 s (host log: $(grep -m1 -i gvisor "$run/host.log" | cut -c1-120))"; failed=1; fi
  fi
  for d in $drivers; do
    if [ "$d" = process ]; then iso_run process code-interpreter "$pr_pool"; else iso_run gvisor "$gv_tpl" "$gv_pool"; fi
  done
  na() { echo "n/a ($gv_why)"; }
  both() {   # P50 LIM50 P99 LIM99: ok, MISSED or n/a
    local a b; a=$(check "$1" le "$2"); b=$(check "$3" le "$4")
    if [ "$a$b" = okok ]; then echo ok; elif [ "$a$b" = n/an/a ]; then echo n/a; else echo MISSED; fi
  }
  g() { if [ -n "$gv_why" ]; then na; else echo "${1:-n/a}"; fi; }
  row 7 "create from a full warm pool, p50 / p99: process" "${iso_cr[process]}" "≤ 15 / 40 ms" \
    "$(both "${iso_c50[process]}" 15 "${iso_c99[process]}" 40)"
  row 7 "… gvisor" "$(g "${iso_cr[gvisor]}")" "≤ 10 / 30 ms" \
    "$(both "${iso_c50[gvisor]}" 10 "${iso_c99[gvisor]}" 30)"
  row 7 "RunCode x=1+1 through the gateway, p50 / p99: process" "${iso_rc[process]}" "≤ 0.5 / 2 ms" \
    "$(both "${iso_r50[process]}" 0.5 "${iso_r99[process]}" 2)"
  row 7 "… gvisor" "$(g "${iso_rc[gvisor]}")" "≤ 0.5 / 2 ms" \
    "$(both "${iso_r50[gvisor]}" 0.5 "${iso_r99[gvisor]}" 2)"
  row 7 "RunCode x=1+1 directly to the host, p50 / p99: process / gvisor" "${iso_rh[process]:-n/a} / $(g "${iso_rh[gvisor]}")" "compare" ""
  row 7 "import json, csv, re: first run in a fresh sandbox, p50: process / gvisor" "${iso_imp[process]:-n/a} / $(g "${iso_imp[gvisor]}")" "compare" ""
  row 7 "pandas groupby (10,000 rows): first in a fresh sandbox / again, p50: process" "${iso_gb[process]:-n/a}" "compare" ""
  row 7 "… gvisor" "$(g "${iso_gb[gvisor]}")" "compare" ""
  for k in $iso_counts; do
    row 7 "idle PSS per sandbox, $k sandbox(es): process" "${iso_pss_txt[process.$k]:-n/a}" "≤ 10 MiB" "$(check "${iso_pss[process.$k]}" le 10)"
    row 7 "… gvisor" "$(g "${iso_pss_txt[gvisor.$k]}")" "≤ 64 MiB" "$( [ -n "$gv_why" ] && echo n/a || check "${iso_pss[gvisor.$k]}" le 64)"
  done
  notes+=("Scenario 7: each create waits until the template's pool is full again (the host's /metrics), so it takes a warm sandbox with no refill running; gvisor pool $gv_pool, process pool $pr_pool. Idle PSS: the Pss of every process in each sandbox's cgroup (/proc/PID/smaps_rollup), summed per sandbox, mean over the sandboxes; for gvisor that is the shim, the Sentry, the gofer and the ptrace stubs (one per address space inside), for process sandgate-init and the context. Pages mapped by several processes (the runsc binary, Python's libraries, the zygote's heap, the Sentry's memory file mapped by the Sentry and its stubs) are divided among the processes mapping them, so the sum over a machine's processes is its real use. Each sandbox ran x=1+1 once, then idled.")
fi

# ---- report -------------------------------------------------------------
table() {
  echo "| # | figure | measured | target | |"
  echo "|---|---|---|---|---|"
  local r
  for r in "${rows[@]}"; do
    IFS='|' read -r s f m t st <<<"$r"
    echo "| $s | $f | $m | $t | $st |"
  done
}
tbl=$(table)
echo "$tbl"
missed=$(grep -c '| MISSED |' <<<"$tbl" || true)

mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
rev=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo "?")
[ -n "$(git -C "$repo" status --porcelain 2>/dev/null | grep -v '^??' || true)" ] && rev="$rev (with uncommitted changes)"
load1=$(cut -d' ' -f1-3 /proc/loadavg)
nginx_v=$(nginx -v 2>&1 | sed 's/.*version: //' || true)

if [ -z "$out" ]; then
  if [ "$smoke" = 1 ]; then out=$work/../sgbench-smoke-$$.md; else out=$repo/docs/benchmarks.md; fi
fi
mkdir -p "$(dirname "$out")"
{
  echo "# Benchmarks"
  echo
  echo "Produced by \`$cmdline\` (run from the repository root after \`cmake -B build && cmake --build build\`)"
  echo "on $(date -u +%Y-%m-%d), commit $rev, binaries from \`$build\`$([ "$smoke" = 1 ] && echo ', SMOKE MODE (few seconds; figures meaningless)')."
  echo
  echo "Machine: $(nproc) cores ($cpu), $mem memory, Linux $(uname -r); load average before the run"
  echo "$load_before (other work on the machine), at the end $load1 (the bench's own processes included)."
  echo "A 2-core VM: run-to-run spread is large (context switches are costly here, see the profile below)."
  echo
  echo "Setup: host and gateway from deploy/local/run.sh (one loop thread each) with a bench policy"
  echo "(rate and sandbox quotas lifted), a private cgroup root when possible; nginx ${nginx_v:-n/a} with"
  echo "\`worker_processes 1\`, an \`upstream\` block with \`keepalive 1024\`, \`keepalive_requests 1000000\`"
  echo "(upstream and client side) and \`http2_max_concurrent_streams 1024\`, forwarding to the same host."
  echo "Load: bench/load.c (bench_load), a closed-loop client on the C-core completion-queue API, one"
  echo "thread, one HTTP/2 connection, \`-c\` calls in flight; ${secs} s measured after ${warm} s warm-up per point."
  echo "Scenario 3's unary call is GetSandbox on a live sandbox (gateway: authenticated, policy, ownership,"
  echo "forwarded to the host; host, bare relay and nginx: the host's GetSandbox). The bare relay is"
  echo "bench/relay.c (bench_relay): the gateway's forward on the same rpc layer (one loop thread, close"
  echo "watch, one batch each way) with none of sandgate's code, i.e. the cost of two C-core legs."
  echo "CPU µs/call: utime+stime deltas of the load generator (client), the proxy (nginx: master + worker)"
  echo "and the host (/proc/PID/stat) over the measured window divided by calls."
  echo "Scenario 3 runs each point $reps time(s), gateway / host / bare relay / nginx interleaved, and shows the run"
  echo "with the median rate (the spread is under Notes)."
  echo "\"compare\" rows are the alternatives, measured in the same run. MISSED: $missed."
  echo
  echo "$tbl"
  echo
  if [ ${#notes[@]} -gt 0 ]; then
    echo "Notes:"
    for n in "${notes[@]}"; do echo "- $n"; done
    echo
  fi
  if [ -f "$here/NOTES.md" ] && [ "$smoke" = 0 ]; then cat "$here/NOTES.md"; fi
} >"$out"
say "wrote $out"

if [ "$smoke" = 1 ] && [ "$failed" != 0 ]; then
  say "smoke: a sandgate figure could not be measured or a call failed"; exit 1
fi
exit 0
