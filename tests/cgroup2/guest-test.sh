#!/bin/sh
# tests/cgroup2/guest-test.sh — runs inside the VM (guest-init.sh's sg.cmd):
# a host and a gateway with tests/cgroup2/policy.yaml on the VM's pure
# cgroup v2 hierarchy, then check_v2.py against them. The VM has only lo.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${SG_V2_BUILD:-$repo/build}
[ -n "$build" ] || build=$repo/build
echo "guest: cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
echo "guest: interfaces: $(ls /sys/class/net | tr '\n' ' ')"
export SANDGATE_BUILD=$build SANDGATE_RUN_DIR=/run/sgv2 SANDGATE_PORT=0 SANDGATE_HOST_PORT=0
export SANDGATE_POLICY=$repo/tests/cgroup2/policy.yaml SANDGATE_POOL_SIZE=1
# the process template of deploy/local/host.yaml only (tests/drivers.py; no runsc in the VM)
cp "$repo/deploy/local/host.yaml" /run/sgv2-host.yaml
SANDGATE_TEST_DRIVER=process /usr/bin/python3 "$repo/tests/drivers.py" /run/sgv2-host.yaml
export SANDGATE_HOST_CONFIG=/run/sgv2-host.yaml
"$repo/deploy/local/run.sh" start || { cat /run/sgv2/*.log; exit 1; }
export SANDGATE_ADDR=127.0.0.1:$(cat /run/sgv2/gateway.port)
/usr/bin/python3 "$repo/tests/cgroup2/check_v2.py"
rc=$?
[ $rc = 0 ] || { echo "guest: host log:"; tail -n 40 /run/sgv2/host.log; }
"$repo/deploy/local/run.sh" stop >/dev/null 2>&1
exit $rc
