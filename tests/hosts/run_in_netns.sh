#!/usr/bin/env bash
# run_in_netns.sh — run one multi-host gateway test (tests/hosts/test_*.py)
# inside a network namespace this script creates, with only `lo` and no
# route out (checked before anything starts). The test itself starts its
# hosts and gateways (sghosts.py) and stops them by PID; this script always
# deletes the namespace and the temp dir.
#
#   run_in_netns.sh <build dir> <test.py> [unittest args...]
#
# `nsenter --net` (net only), not `ip netns exec`, which remounts /sys and
# would hide /sys/fs/cgroup from the hosts (see tests/security/run_in_netns.sh).
set -euo pipefail
build=$(realpath "$1"); shift
test_py=$(realpath "$1"); shift

[ "$(id -u)" = 0 ] || { echo "run_in_netns.sh: needs root (netns, cgroups)" >&2; exit 1; }
for b in ip nsenter; do command -v $b >/dev/null || { echo "run_in_netns.sh: $b missing" >&2; exit 1; }; done

ns=sg-hosts-$$
tmp=$(mktemp -d /tmp/sg-hosts.XXXXXX)
cleanup() {
  local rc=$?
  set +e
  trap '' PIPE
  ip netns del "$ns" 2>/dev/null
  if [ "${SG_HOSTS_KEEP_TMP:-0}" = 1 ]; then echo "kept $tmp"; else rm -rf --one-file-system "$tmp"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns"
ip -n "$ns" link set lo up
links=$(ip -n "$ns" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort -u | tr '\n' ' ')
[ "$links" = "lo " ] || { echo "ABORT: netns $ns has interfaces other than lo: $links" >&2; exit 1; }
for fam in -4 -6; do
  [ -z "$(ip -n "$ns" $fam route show default)" ] || { echo "ABORT: netns $ns has a default route" >&2; exit 1; }
  bad=$(ip -n "$ns" $fam route show table all | grep -v ' dev lo' || true)
  [ -z "$bad" ] || { echo "ABORT: netns $ns has a non-loopback route: $bad" >&2; exit 1; }
done
echo "netns $ns: links [${links% }], only loopback routes"

nsenter --net=/run/netns/$ns env SANDGATE_BUILD="$build" SG_HOSTS_TMP="$tmp" \
    SG_HOSTS_NETNS="$ns" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -u "$test_py" "$@"
