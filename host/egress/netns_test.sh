#!/usr/bin/env bash
# netns_test.sh — run the egress proxy's integration test inside a network
# namespace this script creates: only `lo`, no route off the machine. The
# test hosts are addresses added to that lo (198.51.100.10 "public",
# 10.0.0.5 private, 169.254.169.254 metadata; 127.0.0.x is lo already), so
# even a proxy bug that connects where it must not reaches only a test
# server in this namespace. Checked before anything starts.
#
#   netns_test.sh <egress-testd> <netns_test.py> [unittest args]
set -euo pipefail
testd=$(realpath "$1"); shift
test_py=$(realpath "$1"); shift
[ "$(id -u)" = 0 ] || { echo "netns_test.sh: needs root (ip netns)" >&2; exit 1; }
command -v openssl >/dev/null || { echo "netns_test.sh: openssl CLI missing (deploy/packages.txt)" >&2; exit 1; }

ns=sg-egress-$$
tmp=$(mktemp -d /tmp/sg-egress.XXXXXX)
cleanup() { local rc=$?; ip netns del "$ns" 2>/dev/null; rm -rf "$tmp"; exit $rc; }
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
check_no_way_out   # the added addresses are local to lo, still no way out
echo "netns $ns: only lo, no default route, test addresses on lo"

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=allowed.test \
  -addext "subjectAltName=DNS:allowed.test,DNS:evil.test" \
  -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null

exec_env=(env EGRESS_TESTD="$testd" EGRESS_TMP="$tmp" PYTHONDONTWRITEBYTECODE=1)
ip netns exec "$ns" "${exec_env[@]}" /usr/bin/python3 -u "$test_py" "$@"
