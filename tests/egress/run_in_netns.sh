#!/usr/bin/env bash
# run_in_netns.sh — run the egress test (test_egress.py) against a sandgate
# host and gateway that live in a network namespace this script creates:
# only `lo`, no route off the machine, checked before anything starts. The
# test hosts are addresses added to that lo (198.51.100.10 "public",
# 10.0.0.5 private, 169.254.169.254 metadata; 127.0.0.1 is lo's), so even a
# proxy bug that connects where it must not reaches only a server of this
# test. The test (inside the namespace) starts its servers and the daemons
# (deploy/local/run.sh, with its own policy and --egress-hosts file).
#
#   run_in_netns.sh <build dir> <test.py> [unittest args...]
#
# Joins the namespace with `nsenter --net`, not `ip netns exec` (which
# remounts /sys and would hide /sys/fs/cgroup from the host daemon).
set -euo pipefail
build=$(realpath "$1"); shift
test_py=$(realpath "$1"); shift
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

[ "$(id -u)" = 0 ] || { echo "run_in_netns.sh: needs root (netns, cgroups)" >&2; exit 1; }
for b in ip nsenter openssl; do command -v $b >/dev/null || { echo "run_in_netns.sh: $b missing" >&2; exit 1; }; done
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || { echo "run_in_netns.sh: python3-pip missing (deploy/packages.txt)" >&2; exit 1; }

ns=sg-egr-$$
tmp=$(mktemp -d /tmp/sg-egr.XXXXXX)
run=$tmp/run
cleanup() {
  local rc=$?
  set +e
  trap '' PIPE
  # the test stops the daemons itself; this covers a test that died
  [ -e /run/netns/$ns ] && nsenter --net=/run/netns/$ns env SANDGATE_RUN_DIR="$run" \
      "$repo/deploy/local/run.sh" stop >/dev/null 2>&1
  if [ "${SG_EGRESS_KEEP_LOGS:-0}" = 1 ] || [ $rc != 0 ]; then
    for f in "$run"/host.log "$run"/gateway.log "$run"/host-audit.log; do
      [ -f "$f" ] && { echo "---- tail $f"; tail -n 30 "$f"; }
    done
  fi
  ip netns del "$ns" 2>/dev/null
  rm -rf --one-file-system "$tmp"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns"
ip -n "$ns" link set lo up

check_no_way_out() {
  local links bad
  links=$(ip -n "$ns" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort -u | tr '\n' ' ')
  [ "$links" = "lo " ] || { echo "ABORT: netns $ns has interfaces other than lo: $links" >&2; exit 1; }
  for fam in -4 -6; do
    [ -z "$(ip -n "$ns" $fam route show default)" ] || { echo "ABORT: netns $ns has a default route ($fam)" >&2; exit 1; }
    bad=$(ip -n "$ns" $fam route show table all | grep -v ' dev lo' || true)
    [ -z "$bad" ] || { echo "ABORT: netns $ns has a non-loopback route ($fam): $bad" >&2; exit 1; }
  done
}
check_no_way_out
for a in 198.51.100.10/32 10.0.0.5/32 169.254.169.254/32; do
  ip -n "$ns" addr add "$a" dev lo
done
check_no_way_out   # the added addresses are local to lo: still no way out
echo "netns $ns: only lo, no default route, test addresses on lo"

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=allowed.test \
  -addext "subjectAltName=DNS:allowed.test,DNS:evil.test" \
  -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null

# a private host config: own runtime dir and uid range
uid_base=${SG_EGRESS_UID_BASE:-310000}
mkdir -p "$tmp/runtime"
sed -e "s|^runtime_dir:.*|runtime_dir: $tmp/runtime|" -e "s|^uid_base:.*|uid_base: $uid_base|" \
    "$repo/deploy/local/host.yaml" >"$tmp/host.yaml"
# for this run's driver, only the template the tests use (a gvisor run would
# also warm deploy/local's code-interpreter-gvisor: ~2 s of CPU a sandbox)
/usr/bin/python3 "$repo/tests/drivers.py" "$tmp/host.yaml" code-interpreter
grep -q "^uid_base: $uid_base" "$tmp/host.yaml" || { echo "ABORT: could not rewrite host.yaml" >&2; exit 1; }

nsenter --net=/run/netns/$ns env EG_NETNS="$ns" EG_BUILD="$build" EG_TMP="$tmp" EG_RUN="$run" \
    EG_REPO="$repo" SG_SEC_TMP="$tmp" PYTHONDONTWRITEBYTECODE=1 \
    /usr/bin/python3 -u "$test_py" "$@"
