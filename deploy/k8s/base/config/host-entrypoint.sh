#!/bin/sh
# host-entrypoint.sh — what the host container runs (DaemonSet sandgate-host).
# 1. The pod's cgroup namespace is mounted read-only by the runtime; the host
#    makes each sandbox's cgroup under it, so remount it read-write (this
#    needs CAP_SYS_ADMIN, which the host has for its namespaces anyway) and
#    move this process into a leaf, "host": cgroup v2 lets a group hand
#    controllers to children only while no process sits in it itself.
#    Sandboxes stay inside the pod's cgroup, so the pod's limits bound them.
# 2. The name: sandbox ids carry it, and the journal under state_dir is kept
#    per name, so it must be stable per node across pod restarts and at most
#    16 of [a-z0-9]: "n" + 15 hex digits of the node name's SHA-256.
# 3. The address gateways dial: the pod IP (downward API) and the port.
# 4. Drain: `kubectl annotate pod <pod> sandgate.io/drain=true`; the pod's
#    annotations reach the host through the downward API volume podinfo.
set -eu
cg=/sys/fs/cgroup
if [ -f "$cg/cgroup.controllers" ]; then
  mount -o remount,rw "$cg" 2>/dev/null || echo "host-entrypoint: $cg stays read-only" >&2
  mkdir -p "$cg/host"
  echo $$ >"$cg/host/cgroup.procs"
fi
name="n$(printf %s "$NODE_NAME" | sha256sum | cut -c1-15)"
case "$POD_IP" in *:*) addr="[$POD_IP]:7444" ;; *) addr="$POD_IP:7444" ;; esac
exec /usr/local/bin/sandgate-host --config /etc/sandgate/host/host.yaml \
  --name "$name" --advertise "$addr" --drain-file /etc/sandgate/podinfo/annotations "$@"
