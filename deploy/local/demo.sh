#!/bin/sh
# deploy/local/demo.sh — README command (a): install dependencies, build,
# start a host and a gateway on loopback with deploy/local/ config, and run
# a demo agent session through the gateway on each isolation driver: the
# code-interpreter template (process: namespaces + seccomp on the host's
# kernel) and code-interpreter-gvisor (gVisor's user-space kernel; its exec
# step shows uname -r 4.4.0 and gVisor's /proc/version). Leaves the daemons
# running; stop them with deploy/local/run.sh stop.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
./deploy/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
./deploy/local/run.sh stop >/dev/null 2>&1 || true
./deploy/local/run.sh start
for t in code-interpreter code-interpreter-gvisor; do
  echo
  echo "== demo agent session on template $t =="
  SANDGATE_ADDR="127.0.0.1:$(cat deploy/local/run/gateway.port)" SANDGATE_API_KEY=sg-demo-key-0001 \
    SANDGATE_USER=alice ./build/bin/sandgate-cli demo --template "$t"
done
# The same from Python: the client installed offline into a venv (docs/clients.md).
echo
echo "== Python client (clients/python/examples/quickstart.py) =="
[ -x build/pyvenv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages build/pyvenv
build/pyvenv/bin/pip install --quiet --no-index --no-build-isolation ./clients/python
SANDGATE_ADDR="127.0.0.1:$(cat deploy/local/run/gateway.port)" SANDGATE_API_KEY=sg-demo-key-0001 \
  SANDGATE_USER=alice build/pyvenv/bin/python clients/python/examples/quickstart.py
echo
echo "daemons still running (deploy/local/run.sh status|stop); audit log: deploy/local/run/audit.log"
