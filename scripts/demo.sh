#!/usr/bin/env bash
# demo.sh: sets everything up (scripts/setup.sh), builds ompd-inspect and the
# example program testdata/demo.c against the OMPD-enabled runtime, starts
# the example, inspects it with `ompd-inspect attach`, and stops it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh
export PATH=$PATH:/usr/local/go/bin
go build -o bin/ompd-inspect ./cmd/ompd-inspect
make -s -C testdata ompd >/dev/null

out=$(mktemp)
OMP_DEBUG=enabled testdata/bin/demo >"$out" 2>/dev/null &
pid=$!
trap 'kill -KILL $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 1 300); do
  grep -q '^READY' "$out" && break
  kill -0 $pid 2>/dev/null || { echo "demo: the example program exited early" >&2; exit 1; }
  sleep 0.1
done
grep -q '^READY' "$out" || { echo "demo: the example program did not reach its state" >&2; exit 1; }
echo "\$ ompd-inspect attach $pid"
bin/ompd-inspect attach "$pid"
