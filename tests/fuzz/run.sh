#!/bin/sh
# tests/fuzz/run.sh — one bounded libFuzzer run (CTest's <target>_smoke,
# registered by sg_fuzz_target in fuzz.cmake):
#
#   run.sh FUZZER CORPUS [SEED_DIR ...] [-libfuzzer_flag=value ...]
#
# CORPUS is the committed corpus (tests/fuzz/corpus/<target>/): libFuzzer runs
# every input in it and in the SEED_DIRs first, so an input that once crashed
# and is kept there fails the run again if the bug comes back. New inputs go
# to <cwd>/<target>/new (the build tree; the source tree is never written) and
# are reused by the next run. Stops after SANDGATE_FUZZ_SECONDS, else the
# target's SANDGATE_FUZZ_TARGET_SECONDS (fuzz.cmake's SECONDS), else 20; or,
# if set, after SANDGATE_FUZZ_RUNS executions.
#
# A crash, leak, UBSan report or a 10 s input fails the run; the input is left
# in <cwd>/<target>/artifacts/. Fix the bug and copy that file into CORPUS.
# Prints one summary line (runs, exec/s, coverage) and keeps the whole log in
# <cwd>/<target>/log; the summary also goes to <cwd>/<target>/summary.
set -eu
[ $# -ge 2 ] || { echo "usage: run.sh FUZZER CORPUS [SEED_DIR ...] [-flag=value ...]" >&2; exit 2; }
fuzzer=$1
corpus=$2
name=$(basename "$fuzzer")
[ -d "$corpus" ] || { echo "run.sh: $name: corpus $corpus is not a directory" >&2; exit 2; }
work=$(pwd)/$name
mkdir -p "$work/new" "$work/artifacts"
rm -f "$work/artifacts/"*   # only this run's findings
shift   # "$@" is now CORPUS [SEED_DIR ...] [flags]: libFuzzer tells flags by their "-"
if [ -n "${SANDGATE_FUZZ_RUNS:-}" ]; then bound="-runs=$SANDGATE_FUZZ_RUNS"
else bound="-max_total_time=${SANDGATE_FUZZ_SECONDS:-${SANDGATE_FUZZ_TARGET_SECONDS:-20}}"; fi
start=$(date +%s)
rc=0
# The first corpus directory is where libFuzzer writes new inputs.
"$fuzzer" "$bound" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/new" "$@" >"$work/log" 2>&1 || rc=$?
secs=$(( $(date +%s) - start ))
stat() { sed -n "s/^stat::$1: *//p" "$work/log" | tail -n 1; }
last=$(grep -E '^#[0-9]+' "$work/log" | tail -n 1 || true)
cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p')
seeds=$(find "$corpus" -type f | wc -l)
summary="fuzz $name: $(stat number_of_executed_units) runs in ${secs} s, $(stat average_exec_per_sec) exec/s, cov ${cov:-?} ft ${ft:-?}, corpus ${corp:-?} (committed: $seeds inputs), peak rss $(stat peak_rss_mb) MB"
echo "$summary" | tee "$work/summary"
if [ "$rc" -ne 0 ]; then
  tail -n 60 "$work/log"
  echo "run.sh: $name failed (exit $rc); inputs: $(ls "$work/artifacts" | tr '\n' ' ')" >&2
  echo "run.sh: fix the bug, then keep the input: cp $work/artifacts/<file> $corpus/" >&2
  exit 1
fi
