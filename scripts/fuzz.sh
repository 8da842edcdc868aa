#!/usr/bin/env bash
# fuzz.sh: runs each fuzz target of ompd-inspect for a short while (the
# short fuzz run of CI; scripts/test.sh calls it after the tests). It
# fails if a target finds an input that fails; the input is then in the
# package's testdata/fuzz/<target>/ directory, whose path is printed: keep
# it there, as a regression seed, when fixing the bug.
#
# It needs what scripts/setup.sh installs (gcc builds the seeds of some
# targets).
#
# Environment:
#   FUZZTIME          how long each target runs, as go test -fuzztime takes
#                     it. The default is a number of executions per target
#                     (about 20 s each on a 2-CPU machine), not a duration:
#                     with a duration, Go 1.26's fuzzing coordinator can
#                     report "context deadline exceeded" as a failure at
#                     the deadline without any failing input (a race in
#                     internal/fuzz, go.dev/issue/75804, fixed in Go 1.27);
#                     a count has no deadline. A duration (20s) still works.
#   FUZZCACHE_MAX     most inputs kept in each target's cached corpus in
#                     $GOCACHE/fuzz (default 500): before a run, the oldest
#                     beyond that are removed, so that the cache does not
#                     grow without bound and its replay does not take up
#                     the whole run. Not while another fuzz run of the
#                     same package is going on: the fuzzer reads its cached
#                     inputs while it runs, and ends when one is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export PATH=$PATH:/usr/local/go/bin

fuzztime=${FUZZTIME:-}
cachemax=${FUZZCACHE_MAX:-500}
case $cachemax in
'' | *[!0-9]*)
  echo "fuzz.sh: FUZZCACHE_MAX must be a number, not '$cachemax'" >&2
  exit 2
  ;;
esac

# target, package and default number of executions, one per line
targets=(
  "FuzzImage ./target/elf 80000x"
  "FuzzCore ./target/core 80000x"
  "FuzzWalk ./ompd/llvm 50000x"
  "FuzzUnwind ./target/unwind 700000x"
  "FuzzIndentJSON ./cmd/ompd-inspect 200000x"
)

log() { printf 'fuzz.sh: %s\n' "$*" >&2; }

# fuzzing DIR: whether a fuzz run using the cache directory DIR is going on
# (the go command passes it to the test binaries as -test.fuzzcachedir).
fuzzing() {
  local c
  for c in /proc/[0-9]*/cmdline; do
    grep -qzxF -- "-test.fuzzcachedir=$1" "$c" 2>/dev/null && return 0
  done
  return 1
}

cachedir=$(go env GOCACHE)/fuzz
out=$(mktemp)
trap 'rm -f "$out"' EXIT

failed=()
for t in "${targets[@]}"; do
  read -r name pkg count <<<"$t"
  budget=${fuzztime:-$count}
  dir=${pkg#./}
  pkgcache=$cachedir/$(go list "$pkg")
  corpus=$pkgcache/$name
  if [ -d "$corpus" ]; then
    n=$(find "$corpus" -maxdepth 1 -type f | wc -l)
    if [ "$n" -gt "$cachemax" ] && fuzzing "$pkgcache"; then
      log "$name: its cached corpus holds $n inputs, more than FUZZCACHE_MAX=$cachemax, but another fuzz run of $pkg is using it: left as it is"
    elif [ "$n" -gt "$cachemax" ]; then
      log "$name: its cached corpus holds $n inputs; removing the oldest $((n - cachemax)) (FUZZCACHE_MAX=$cachemax)"
      # (awk reads all its input: head would end the pipe early, and
      # pipefail would fail the script on sort's SIGPIPE.)
      find "$corpus" -maxdepth 1 -type f -printf '%T@ %p\n' | sort -n |
        awk -v k="$((n - cachemax))" 'NR <= k { sub(/^[^ ]* /, ""); print }' | xargs -d '\n' rm -f --
    fi
  fi

  log "$name ($pkg) for $budget"
  # -fuzzminimizetime as a count: see the comment on FuzzImage.
  status=0
  go test -run '^$' -fuzz "^$name\$" -fuzztime "$budget" -fuzzminimizetime 300x "$pkg" 2>&1 | tee "$out" || status=$?

  last=$(grep -E '^fuzz: elapsed: ' "$out" | tail -n 1 || true)
  if [ "$status" -eq 0 ]; then
    case $last in
    *execs:*) log "$name: passed; ${last#fuzz: }" ;;
    *) log "$name: passed, but the time ran out before fuzzing began (${last#fuzz: }): raise FUZZTIME or lower FUZZCACHE_MAX" ;;
    esac
    continue
  fi
  failed+=("$name")
  found=no
  while read -r f; do
    found=yes
    log "$name found a failing input: $dir/$f (keep it there as a regression seed)"
  done < <(sed -n 's/^.*Failing input written to \(testdata\/fuzz\/[^ ]*\).*$/\1/p' "$out")
  if [ "$found" = no ]; then
    seed=$(sed -n "/failure while testing seed corpus entry: $name\//{s/^.*entry: $name\/\([^ ]*\).*$/\1/p;q}" "$out")
    if [ -n "$seed" ] && [ -f "$dir/testdata/fuzz/$name/$seed" ]; then
      log "$name fails on its checked-in seed $dir/testdata/fuzz/$name/$seed"
    elif [ -n "$seed" ]; then
      log "$name fails on its seed $seed (added by the test itself)"
    else
      log "$name failed (exit status $status) without a failing input: see the output above"
    fi
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  log "FAIL: ${failed[*]}"
  exit 1
fi
log "every target passed"
