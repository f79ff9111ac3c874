#!/bin/sh
# cli_test.sh — exit codes and output of `sandgate-policy lint|explain|test|
# hash-key`. Usage: cli_test.sh BINARY SOURCE_DIR
set -u
BIN=$1
SRC=$2
TD=$SRC/policy/testdata
EX=$SRC/deploy/policy.example.yaml
fails=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# expect NAME WANT_RC CMD... — run, compare exit code
expect() {
    name=$1 want=$2
    shift 2
    "$@" >"$out" 2>"$err"
    rc=$?
    if [ "$rc" != "$want" ]; then
        echo "FAIL $name: exit $rc, want $want"; cat "$out" "$err"
        fails=$((fails + 1))
    else
        echo "ok   $name"
    fi
}

# has NAME FILE TEXT — FILE contains the exact line TEXT
has() {
    if ! grep -qxF -- "$3" "$2"; then
        echo "FAIL $1: missing line: $3"; cat "$2"
        fails=$((fails + 1))
    fi
}

expect "lint ok" 0 "$BIN" lint "$SRC/deploy/local/policy.yaml"
has "lint ok hash" "$out" "ok $(sha256sum "$SRC/deploy/local/policy.yaml" | cut -d' ' -f1)"
expect "lint example" 0 "$BIN" lint "$EX"
expect "lint errors" 1 "$BIN" lint "$TD/bad.yaml"
has "lint golden cidr" "$err" "$TD/bad.yaml:16:17: tenants[0].network[0].cidrs[0]: bad CIDR '10.0.0.1/8', expected an address with an optional /prefix and no host bits, as in 10.1.0.0/16 or 2001:db8::/32"
has "lint golden ref" "$err" "$TD/bad.yaml:29:21: secrets[0].grants[0].templates[0]: unknown template 'gone'"
has "lint warning" "$err" "$TD/bad.yaml:6:5: tenants[0]: warning: tenant 'acme' has no api_keys or mtls identities; nobody can authenticate as it"
has "lint summary" "$err" "$TD/bad.yaml: 21 errors, 2 warnings"
expect "lint missing file" 1 "$BIN" lint /nonexistent.yaml
has "lint missing message" "$err" "open(/nonexistent.yaml): No such file or directory"

expect "explain allow" 0 "$BIN" explain "$EX" --tenant acme --task pip-1 --template code-interpreter --egress pypi.org:443
has "explain allow decision" "$out" "decision: allow"
has "explain allow rule" "$out" "rule: templates.code-interpreter.network.pypi"
expect "explain deny" 1 "$BIN" explain "$EX" --tenant acme --task x --template code-interpreter --egress evil.example:443
has "explain deny rule" "$out" "rule: default.deny-egress"
expect "explain secret" 0 "$BIN" explain "$EX" --tenant acme --task ci-1 --template code-interpreter --secret github-token
expect "explain create" 0 "$BIN" explain "$EX" --tenant acme --user u --task ci-1 --template code-interpreter --create --egress github.com:443 --secret github-token
has "explain create rule" "$out" "rule: tenants.acme.templates"
ISO=$TD/isolation.yaml
expect "explain isolation deny" 1 "$BIN" explain "$ISO" --tenant secure --user u --task t --template code-interpreter --create
has "explain isolation deny rule" "$out" "rule: tenants.secure.isolation"
has "explain isolation deny message" "$out" "message: tenant 'secure' requires isolation gvisor; template 'code-interpreter' is process"
has "explain isolation deny why" "$out" "isolation: none (refused): template 'code-interpreter' is process (the default; templates.code-interpreter.isolation is not set); tenant 'secure' requires at least gvisor (tenants.secure.isolation)"
expect "explain isolation gvisor" 0 "$BIN" explain "$ISO" --tenant secure --user u --task t --template code-interpreter-gvisor --create
has "explain isolation gvisor rule" "$out" "rule: tenants.secure.templates"
has "explain isolation gvisor why" "$out" "isolation: gvisor: template 'code-interpreter-gvisor' is gvisor (templates.code-interpreter-gvisor.isolation); tenant 'secure' requires at least gvisor (tenants.secure.isolation)"
expect "explain isolation process" 0 "$BIN" explain "$ISO" --tenant open --user u --task t --template code-interpreter --create
has "explain isolation process why" "$out" "isolation: process: template 'code-interpreter' is process (the default; templates.code-interpreter.isolation is not set); tenant 'open' sets no minimum"
expect "lint isolation contradiction" 0 "$BIN" lint "$ISO"
has "lint isolation warning" "$err" "$ISO:17:16: tenants[2].isolation: warning: tenant 'stuck' requires isolation gvisor but every template it may use is weaker; it can create no sandbox"
printf 'templates: [{name: a, isolation: kata}]\ntenants: [{id: x, templates: [a]}]\n' >"$out.bad.yaml"
expect "lint unknown isolation" 1 "$BIN" lint "$out.bad.yaml"
has "lint unknown isolation message" "$err" "$out.bad.yaml:1:34: templates[0].isolation: template 'a': unknown isolation 'kata', expected process or gvisor"
rm -f "$out.bad.yaml"

expect "explain usage: no ask" 2 "$BIN" explain "$EX" --tenant acme
expect "explain usage: two asks" 2 "$BIN" explain "$EX" --tenant acme --egress a.com:1 --secret x
expect "explain invalid policy" 2 "$BIN" explain "$TD/bad.yaml" --tenant acme --egress a.com:1

expect "test pass" 0 "$BIN" test "$EX" "$TD/cases.yaml"
has "test summary" "$out" "7 passed, 0 failed"
expect "test mismatch" 1 "$BIN" test "$EX" "$TD/cases_fail.yaml"
has "test fail line" "$out" "FAIL this expectation is wrong on purpose ($TD/cases_fail.yaml:1:3)"
has "test want" "$out" "  - want: allow"
has "test got" "$out" "  + got:  deny by default.deny-egress"
has "test pass line" "$out" "PASS this one holds"
expect "test invalid cases" 2 "$BIN" test "$EX" "$TD/cases_bad.yaml"
has "cases golden expect" "$err" "$TD/cases_bad.yaml:5:11: [0].expect: expected allow or deny, got 'maybe'"
has "cases golden two asks" "$err" "$TD/cases_bad.yaml:1:3: [0]: expected exactly one of egress, secret or create"
has "cases golden unknown key" "$err" "$TD/cases_bad.yaml:6:3: [1].nme: unknown key 'nme'; did you mean 'name'?"

expect "hash-key" 0 "$BIN" hash-key sg-demo-key-0001
has "hash-key value" "$out" "$(printf %s sg-demo-key-0001 | sha256sum | cut -d' ' -f1)"
expect "hash-key stdin" 0 sh -c "echo sg-demo-key-0001 | '$BIN' hash-key -"
has "hash-key stdin value" "$out" "$(printf %s sg-demo-key-0001 | sha256sum | cut -d' ' -f1)"
expect "no command" 2 "$BIN"
expect "unknown command" 2 "$BIN" frobnicate

[ "$fails" = 0 ] && echo "all CLI checks passed"
exit "$fails"
