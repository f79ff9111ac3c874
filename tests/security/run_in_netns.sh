#!/usr/bin/env bash
# run_in_netns.sh — run one security test file against a sandgate host and
# gateway that live in a network namespace this script creates, with only
# `lo` and no route out, so nothing a test (or a broken sandbox) sends can
# leave this machine.
#
#   run_in_netns.sh <build dir> <test.py> [unittest args...]
#
# Order: create netns sg-sec-$$ → bring lo up → ASSERT only lo and no route
# other than loopback's (else abort before anything starts) → start the
# daemons inside it → assert their net namespace is ours → run the test
# inside it → always (trap) stop the daemons, delete the netns and temp dirs.
#
# Daemons and clients join the namespace with `nsenter --net` (net only),
# not `ip netns exec`: the latter also remounts /sys, which hides
# /sys/fs/cgroup and would run the host without cgroup limits. They also run
# in a private mount namespace (optionally with a private cgroup parent,
# see below).
#
# SG_SEC_HOST_NOFILE="SOFT:HARD" starts the host with that RLIMIT_NOFILE
# (run.sh SANDGATE_HOST_NOFILE), for the fd exhaustion test.
# SG_SEC_HOST_SED is one more sed expression applied to the host config
# (the admission tests raise a reserve with it).
#
# The host gets a private copy of deploy/local/host.yaml with its own
# runtime_dir and uid_base (SG_SEC_UID_BASE, default: a range no other test
# running now holds, tests/uid_range.sh) so the uid and process checks never
# see sandboxes of another host on this machine, also under ctest -j.
set -euo pipefail
build=$(realpath "$1"); shift
test_py=$(realpath "$1"); shift
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

[ "$(id -u)" = 0 ] || { echo "run_in_netns.sh: needs root (netns, cgroups)" >&2; exit 1; }
for b in ip nsenter; do command -v $b >/dev/null || { echo "run_in_netns.sh: $b missing" >&2; exit 1; }; done

ns=sg-sec-$$
tmp=$(mktemp -d /tmp/sg-sec.XXXXXX)
run=$tmp/run
started=0
cgdirs=()
cleanup() {
  local rc=$?
  set +e
  trap '' PIPE   # a closed stdout (| head) must not cut the cleanup short
  if [ "$started" = 1 ]; then
    nsenter --net=/run/netns/$ns env SANDGATE_RUN_DIR="$run" "$repo/deploy/local/run.sh" stop >/dev/null
  fi
  if [ "${SG_SEC_KEEP_LOGS:-0}" = 1 ] || [ $rc != 0 ]; then
    for f in "$run"/host.log "$run"/gateway.log; do
      [ -f "$f" ] && { echo "---- tail $f"; tail -n 40 "$f"; }
    done
  fi
  ip netns del "$ns" 2>/dev/null
  # Our cgroup parents: empty once the host removed its sandboxes.
  for p in "${cgdirs[@]}"; do
    d=${p%%:*}
    for sub in "$d"/*/; do
      [ -d "$sub" ] || continue
      echo "LEAK: cgroup $sub still exists after the host stopped (procs: $(tr '\n' ' ' <"$sub/cgroup.procs"))" >&2
      rmdir "$sub" 2>/dev/null
      [ $rc = 0 ] && rc=1
    done
    rmdir "$d" 2>/dev/null
  done
  # The runtime dir's newroot is only ever mounted inside sandboxes' own
  # mount namespaces; --one-file-system keeps rm off anything mounted anyway.
  rm -rf --one-file-system "$tmp"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns"
ip -n "$ns" link set lo up
innet() { nsenter --net=/run/netns/$ns "$@"; }

# ---- the namespace must have no way out, checked before anything starts ----
links=$(ip -n "$ns" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort -u | tr '\n' ' ')
if [ "$links" != "lo " ]; then
  echo "ABORT: netns $ns has interfaces other than lo: $links" >&2; exit 1
fi
for fam in -4 -6; do
  if [ -n "$(ip -n "$ns" $fam route show default)" ]; then
    echo "ABORT: netns $ns has a default route ($fam)" >&2; exit 1
  fi
  # Every route in every table may only go through lo.
  bad=$(ip -n "$ns" $fam route show table all | grep -v ' dev lo' || true)
  if [ -n "$bad" ]; then
    echo "ABORT: netns $ns has a non-loopback route ($fam): $bad" >&2; exit 1
  fi
done
if [ -n "$(ip -n "$ns" -4 route show)" ]; then
  echo "ABORT: netns $ns main IPv4 table not empty" >&2; exit 1
fi
echo "netns $ns: links [${links% }], no default route, only loopback routes"

# ---- private cgroup parent (optional, SG_SEC_PRIVATE_CGROUP=1) ----
# Before 2da09ce every sandgate-host removed all of /sys/fs/cgroup/*/sandgate/*
# at start, so hosts on one machine killed each other's sandboxes. With
# SG_SEC_PRIVATE_CGROUP=1 the daemons run in a private mount namespace where
# each controller's sandgate/ is a bind of a cgroup of our own,
# /sys/fs/cgroup/<ctrl>/sgsec-$$. Off by default: hosts now clean up only
# cgroups of their own name, and the warm-pool create path (94476eb) fails
# under the bind with ENOENT from sgc_unshare_pid1.
cg=/sys/fs/cgroup
cgname=sgsec-$$
cgdirs=()
if [ "${SG_SEC_PRIVATE_CGROUP:-0}" = 0 ]; then
  :   # share the machine's sandgate/ parent (hosts with per-name stale cleanup)
elif [ -f $cg/cgroup.controllers ]; then
  cgdirs=("$cg/$cgname:$cg/sandgate")
else
  for c in memory pids cpu freezer; do
    [ -d "$cg/$c" ] && cgdirs+=("$cg/$c/$cgname:$cg/$c/sandgate")
  done
fi
for p in "${cgdirs[@]}"; do mkdir -p "${p%%:*}" "${p##*:}"; done
if [ ${#cgdirs[@]} -gt 0 ] && [ -f $cg/cgroup.controllers ]; then
  # v2: the controllers the host wants must be enabled in our group.
  echo "+memory +pids +cpu" >"$cg/$cgname/cgroup.subtree_control" 2>/dev/null || true
fi

# ---- daemons inside it ----
if [ -n "${SG_SEC_UID_BASE:-}" ]; then uid_base=$SG_SEC_UID_BASE
else . "$repo/tests/uid_range.sh"; sg_uid_range; fi   # the lock (fd 9) lives until we exit
mkdir -p "$tmp/runtime"
sed -e "s|^runtime_dir:.*|runtime_dir: $tmp/runtime|" \
    -e "s|^uid_base:.*|uid_base: $uid_base|" \
    -e "${SG_SEC_HOST_SED:-}" \
    "$repo/deploy/local/host.yaml" >"$tmp/host.yaml"
# for this run's driver, only the template the tests use (a gvisor run would
# also warm deploy/local's code-interpreter-gvisor: ~2 s of CPU a sandbox)
/usr/bin/python3 "$repo/tests/drivers.py" "$tmp/host.yaml" code-interpreter
grep -q "^runtime_dir: $tmp/runtime" "$tmp/host.yaml" && grep -q "^uid_base: $uid_base" "$tmp/host.yaml" \
  || { echo "ABORT: could not rewrite host.yaml" >&2; exit 1; }

# A secret only the daemons' environment holds: the tests look for it from
# inside sandboxes (host /proc/*/environ must be unreachable).
marker="sg-sec-host-secret-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
started=1
export SG_SEC_NS=$ns SG_SEC_BUILD=$build SG_SEC_TMP=$tmp SG_SEC_MARKER=$marker \
       SG_SEC_UID_BASE=$uid_base SG_SEC_CGDIRS="${cgdirs[*]}" SG_SEC_TEST=$test_py
innet unshare -m --propagation private bash -c 9>&- '
  set -euo pipefail
  for p in $SG_SEC_CGDIRS; do mount --bind "${p%%:*}" "${p##*:}"; done
  run=$SG_SEC_TMP/run
  env SANDGATE_RUN_DIR="$run" SANDGATE_PORT=0 SANDGATE_HOST_PORT=0 \
      SANDGATE_HOST_NOFILE="${SG_SEC_HOST_NOFILE:-}" \
      SANDGATE_BUILD="$SG_SEC_BUILD" SANDGATE_HOST_CONFIG="$SG_SEC_TMP/host.yaml" \
      SG_SEC_HOST_SECRET="$SG_SEC_MARKER" '"$repo"'/deploy/local/run.sh start
  nsino=$(stat -L -c %i /run/netns/$SG_SEC_NS)
  for d in host gateway; do
    pid=$(cat "$run/$d.pid")
    got=$(stat -L -c %i /proc/$pid/ns/net)
    [ "$got" = "$nsino" ] || { echo "ABORT: $d (pid $pid) is not in netns $SG_SEC_NS" >&2; exit 1; }
  done
  exec env SANDGATE_ADDR="127.0.0.1:$(cat "$run/gateway.port")" \
      SG_SEC_RUN_DIR="$run" SG_SEC_NETNS="$SG_SEC_NS" SG_SEC_TMP="$SG_SEC_TMP" \
      SG_SEC_HOST_NAME="$(cat "$run/host.name" 2>/dev/null || echo local)" \
      SG_SEC_HOST_PID="$(cat "$run/host.pid")" SG_SEC_GATEWAY_PID="$(cat "$run/gateway.pid")" \
      SG_SEC_HOST_SECRET="$SG_SEC_MARKER" PYTHONDONTWRITEBYTECODE=1 \
      /usr/bin/python3 -u "$SG_SEC_TEST" "$@"
' sg-sec "$@"
