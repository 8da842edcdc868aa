#!/usr/bin/env bash
# test.sh: runs every test of ompd-inspect, then a short run of each fuzz
# target (scripts/fuzz.sh: a number of executions each, or FUZZTIME). It first runs
# scripts/setup.sh (idempotent), so it also works on a fresh machine.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh
export PATH=$PATH:/usr/local/go/bin
go vet ./...
go test -count=1 -timeout 40m ./... "$@"
bash scripts/fuzz.sh
