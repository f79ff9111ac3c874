#!/bin/sh
# deploy/deps.sh — install sandgate's build, run and test dependencies from
# Debian's packages (deploy/packages.txt). Idempotent: installs only what is
# missing. Run as root on Debian 12.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
missing=""
for p in $(grep -v '^#' "$here/packages.txt"); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# node/npm may come from elsewhere (nodesource, nvm); accept working binaries.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  missing=$(echo "$missing" | tr ' ' '\n' | grep -vx -e nodejs -e npm | tr '\n' ' ')
fi
if [ -n "$(echo "$missing" | tr -d ' ')" ]; then
  echo "deps.sh: installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends $missing
fi
# The deploy_k8s test's validator (npm kubernetes-models, pinned): prime
# npm's cache so the test's `npm ci --prefer-offline` needs no registry.
if command -v npm >/dev/null 2>&1; then
  t=$(mktemp -d)
  cp "$here/k8s/check/package.json" "$here/k8s/check/package-lock.json" "$t/"
  (cd "$t" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
    echo "deps.sh: npm ci for deploy/k8s/check failed (deploy_k8s will retry)" >&2
  rm -rf "$t"
fi
