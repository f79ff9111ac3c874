#!/bin/sh
# check_systemd.sh BUILD — `systemd-analyze verify` on deploy/systemd/*.service.
# verify also checks that ExecStart's binary exists, so the units are
# checked on copies whose /usr/local/bin/ points into this build; nothing is
# installed and no unit is loaded into a running systemd.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for u in "$repo"/deploy/systemd/*.service; do
  sed "s|/usr/local/bin/|$build/bin/|g" "$u" >"$tmp/$(basename "$u")"
done
out=$(systemd-analyze verify --man=no "$tmp"/*.service 2>&1) || { echo "$out"; exit 1; }
# verify exits 0 on some warnings (unknown keys, bad values): none allowed
if [ -n "$out" ]; then echo "$out"; exit 1; fi
echo "deploy/systemd: $(ls "$tmp" | wc -l) units verify clean"
