# tests/uid_range.sh — sourced by the netns harnesses: a sandbox uid range
# no other test running on this machine holds, so tests run in parallel
# (ctest -j) never see each other's sandboxes in their by-uid process checks.
#
#   . tests/uid_range.sh; sg_uid_range   # sets uid_base, holds the range's lock on fd 9
#
# Range i (0..39) is uid_base 1000000 + i * 5000 (5,000 uids: room for the
# host's 1,024 slots and the teardown test's 4,096-uid window), held by
# flock(2) on /tmp/sandgate-uid-ranges/<i>.lock for as long as fd 9 is open
# in this shell; the caller keeps it until its daemons are stopped and
# closes it for every child (9>&-), so no daemon or sandbox inherits it.
# tests/uid_range.py hands out the same ranges to Python harnesses. Ranges
# stay clear of the fixed ones: deploy/local 200000, egress 310000,
# multihost 460000-480000.
sg_uid_range() {
  local d=/tmp/sandgate-uid-ranges i
  mkdir -p "$d"
  for i in $(seq 0 39); do
    exec 9>>"$d/$i.lock"
    if flock -n 9; then
      uid_base=$((1000000 + i * 5000))
      return 0
    fi
    exec 9>&-
  done
  echo "uid_range.sh: all 40 uid ranges are in use" >&2
  return 1
}
