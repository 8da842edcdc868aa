#!/usr/bin/env bash
# test.sh: runs every test of ompd-inspect, the concurrent packages' again
# under the race detector, then a short run of each fuzz
# target (scripts/fuzz.sh: a number of executions each, or FUZZTIME). It first runs
# scripts/setup.sh (idempotent), so it also works on a fresh machine.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh
export PATH=$PATH:/usr/local/go/bin
go vet ./...
go test -count=1 -timeout 40m ./... "$@"
# Once more with the race detector, the packages whose code shares state
# across goroutines (the memory cache, the tracing thread, the waiter,
# the dll registry),
# and of the CLI's tests those that run its concurrent parts (traces,
# signals and interrupts, attach cycles in-process, --retry, the dll
# backend, debuginfod): the CLI's comparison suites (the runtime matrix,
# gdb, 500 attach cycles) would take most of CI's time under -race and
# add no concurrent code of their own.
go test -race -count=1 -timeout 40m ./target/ ./target/ptrace/ ./ompd/llvm/ ./ompd/dll/ ./internal/trace/ "$@"
go test -race -count=1 -timeout 40m ./cmd/ompd-inspect/ "$@" \
  -run 'TestTrace|TestSignal|TestRetry|TestTargetGone|TestInProcessAttachCycles|TestDLL|TestBackendsWithoutStateTracking|TestDebuginfodNotWhileStopped|TestAlreadyTraced|TestNotOpenMP|TestStrippedRuntime'

bash scripts/fuzz.sh
