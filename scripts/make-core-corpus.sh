#!/usr/bin/env bash
# make-core-corpus.sh: writes testdata/cores anew: for the OMPD build and
# each of Debian's libomp releases that scripts/setup.sh extracts, a kernel
# core and a gcore (xz-compressed) of testdata/barrier.c with
# OMP_DEBUG=enabled, the two executables they ran, and manifest.json (each
# core's runtime path and build-id, and the READY line the program printed).
# TestCoreCorpus (cmd/ompd-inspect) reads them without starting programs.
# Run as root (kernel cores need core_pattern) after scripts/setup.sh;
# commit the result. The cores record the system libraries' build-ids: a
# machine with other ones needs a new corpus.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export PATH=$PATH:/usr/local/go/bin
# The default coredump filter: anonymous memory, ELF headers.
echo 0x33 >/proc/self/coredump_filter
rm -f testdata/cores/*.core.xz
go test -tags corpusgen -count=1 -run TestRegenerateCoreCorpus ./internal/fixture/
ls -l testdata/cores
