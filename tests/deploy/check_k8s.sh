#!/bin/sh
# check_k8s.sh BUILD — deploy/k8s, offline:
#  1. `kubectl kustomize` renders every overlay;
#  2. every object is valid against the Kubernetes schema of a named
#     version, with no unknown field (deploy/k8s/check/validate.js);
#  3. every config the manifests ship parses with the daemon that reads it,
#     at the path the pod mounts it: `sandgate --check-config` (config,
#     policy, API-keys file, TLS files; a throwaway certificate and an empty
#     keys file stand in for each Secret),
#     `sandgate-host --check-config` with the --name/--advertise the
#     entrypoint would pass, `sandgate-policy lint`, `sh -n` on the
#     entrypoint.
# The validator's npm packages are pinned (deploy/k8s/check/package-lock.json)
# and installed into BUILD/deploy-k8s-check by `npm ci`; deploy/deps.sh
# primes npm's cache with them so this needs no registry afterwards.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
bin=$build/bin
chk=$build/deploy-k8s-check
k8s=${SANDGATE_K8S_DIR:-$repo/deploy/k8s}   # a test points it at a broken copy
lock=$repo/deploy/k8s/check/package-lock.json
if ! cmp -s "$lock" "$chk/package-lock.json" 2>/dev/null || [ ! -d "$chk/node_modules" ]; then
  rm -rf "$chk" && mkdir -p "$chk"
  cp "$repo/deploy/k8s/check/package.json" "$lock" "$chk/"
  (cd "$chk" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
policy_bin=$(find "$build" -name sandgate-policy -type f -perm -u+x | head -1)
fail=0
n=0
for o in "$k8s"/overlays/*/; do
  name=$(basename "$o")
  n=$((n + 1))
  out=$tmp/$name.yaml
  if ! kubectl kustomize "$o" >"$out" 2>"$tmp/err"; then
    echo "$name: kubectl kustomize failed:"; cat "$tmp/err"; fail=1; continue
  fi
  mkdir -p "$tmp/$name"
  NODE_PATH=$chk/node_modules node "$repo/deploy/k8s/check/validate.js" "$out" "$tmp/$name" || fail=1
  for w in "$tmp/$name"/*/; do
    wn=$(basename "$w")
    image=$(cat "$w/image")
    case "$image" in sandgate:*|*/sandgate:*) ;; *) continue ;; esac
    # Secret mounts: a throwaway key pair where the pod would have tls.*,
    # and its certificate as the ca.crt a Secret with a CA carries
    while read -r mnt secret; do
      mkdir -p "$w$mnt"
      openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=sandgate -days 1 \
        -keyout "$w$mnt/tls.key" -out "$w$mnt/tls.crt" 2>/dev/null
      cp "$w$mnt/tls.crt" "$w$mnt/ca.crt"
      # and an API-keys file with no digest (the Secret sandgate-api-keys)
      printf '{}\n' >"$w$mnt/api-keys.yaml"
    done <"$w/secrets"
    argv0=$(sed -n 1p "$w/argv")
    case "$argv0" in
      /usr/local/bin/sandgate)       # the gateway: its own argv, rebased
        cfg=$(sed -n '/^--config$/{n;p}' "$w/argv")
        if ! "$bin/sandgate" --config "$w$cfg" --check-config >"$tmp/log" 2>&1; then
          echo "$name/$wn: sandgate --check-config $cfg:"; cat "$tmp/log"; fail=1
        fi
        pol=$(find "$w" -name policy.yaml | head -1)
        if [ -n "$policy_bin" ] && ! "$policy_bin" lint "$pol" >"$tmp/log" 2>&1; then
          echo "$name/$wn: sandgate-policy lint:"; cat "$tmp/log"; fail=1
        fi ;;
      /bin/sh)                       # the host, through its entrypoint
        ep=$w$(sed -n 2p "$w/argv")
        sh -n "$ep" || { echo "$name/$wn: $ep: syntax"; fail=1; }
        cfg=$(sed -n 's|^exec /usr/local/bin/sandgate-host --config \([^ ]*\).*|\1|p' "$ep")
        [ -n "$cfg" ] || { echo "$name/$wn: the entrypoint execs no sandgate-host --config"; fail=1; continue; }
        # the name and address exactly as the entrypoint computes them
        name_arg=$(NODE_NAME=worker-1.example.internal sh -c "$(sed -n 's/^name=/printf %s /p' "$ep")")
        if ! "$bin/sandgate-host" --config "$w$cfg" --check-config --name "$name_arg" \
             --advertise 10.244.1.7:7444 >"$tmp/log" 2>&1; then
          echo "$name/$wn: sandgate-host --check-config $cfg:"; cat "$tmp/log"; fail=1
        fi ;;
      *) echo "$name/$wn: unexpected command $argv0"; fail=1 ;;
    esac
  done
done
[ "$n" -gt 0 ] || { echo "no overlays under $k8s/overlays"; exit 1; }
[ "$fail" -eq 0 ] || exit 1
echo "deploy/k8s: $n overlays render, validate and their configs load"
