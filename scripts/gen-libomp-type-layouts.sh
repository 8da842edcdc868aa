#!/usr/bin/env bash
# gen-libomp-type-layouts.sh: writes, for each LLVM version whose libomp
# Debian ships, the layouts of the runtime types that ompd-inspect reads
# beyond what OMPD's layout symbols describe (construct locations, task
# ids, task deques, the dependence graph, the queuing lock a waiting
# thread's wait id names), as Debian's build of that
# release lays them out on x86-64: ompd/llvm/recovery/types/NN.txt.
#
# For each version it extracts openmp/ (and the cmake/ and llvm/cmake/
# directories its CMake files include) from Debian's llvm-toolchain-NN
# source package into $OMPD_INSPECT_CACHE/src, configures the runtime with
# the settings of Debian's package that change its data structures (see
# "Debian's configuration" below), generates only the headers the
# runtime's sources include (kmp_config.h, omp.h, omp-tools.h at configure
# time; kmp_i18n_id.inc and kmp_i18n_default.inc with the
# libomp-needed-headers target), then compiles a small probe program
# against the runtime's headers with the flags of the runtime's own
# compile command for kmp_tasking.cpp (compile_commands.json: the same
# definitions, include directories, language standard and compiler) and
# runs it. The probe prints, one a line,
#   TYPE FIELD OFFSET SIZE    offsetof(TYPE, FIELD), sizeof the field
#   TYPE - SIZE               sizeof(TYPE)
# for the types and fields ompd-inspect reads through ompd.TypeLayouts
# (grep readTyped, FieldLayout and TypeSize in ompd/llvm/*.go), and, so
# that the table can be checked against a runtime, for every type and field that
# the runtime's own OMPD layout values describe (OMPD_FOREACH_ACCESS and
# the types among OMPD_FOREACH_SIZEOF of its ompd-specific.h, whose names
# end in _t; the others are globals and int and char: the quantities whose
# ompd_access__T__F, ompd_sizeof__T__F and ompd_sizeof__T values ompd_init
# stores). ompd/llvm/recovery checks the table against the values it
# recovers from a runtime before it serves any of it.
#
# Debian's configuration (debian/rules of llvm-toolchain-13 to -19): the
# shipped libomp is the stage-2 build of the LLVM runtimes; stage 1's
# -DLIBOMP_OMPT_SUPPORT=OFF is not passed through to stage 2
# (CLANG_BOOTSTRAP_PASSTHROUGH names only LIBOMP_ENABLE_RTTI among the
# OpenMP settings), so OMPT and OMPD have their defaults, on for Linux on
# x86-64. The runtimes are built with CMAKE_BUILD_TYPE=RelWithDebInfo and
# "-O2 -DNDEBUG -g1" (BOOTSTRAP_RUNTIMES_CMAKE_ARGS), which makes
# kmp_config.h define KMP_DEBUG (Debian's libomp holds the KMP_DEBUG trace
# strings); LLVM_ENABLE_ASSERTIONS is off outside scan-build and coverity
# builds, so LIBOMP_ENABLE_ASSERTIONS is off; LIBOMP_ENABLE_RTTI=OFF,
# LIBOMP_LIBFLAGS=-lm, OPENMP_ENABLE_LIBOMP_PROFILING=OFF. Everything else
# (ITT notify, adaptive locks, no hwloc, no debugger support, no stats, no
# hierarchical scheduling, no OMPX task graph) keeps CMake's default, as in
# Debian's build. The runtime is configured stand-alone (openmp/ as the
# top-level project, as scripts/setup.sh does) rather than through the
# LLVM runtimes build; nothing of the structures depends on that.
# libomptarget is left out (OPENMP_ENABLE_LIBOMPTARGET=OFF): Debian builds
# it, but here it would need LLVM itself, and in every release the setting
# only declares and calls functions, it changes no structure.
#
# The probe is written by this script and only includes the runtime's
# headers; nothing of LLVM is copied into the repository. Run it as root on
# Debian 12 with clang-19, cmake, ninja, perl and python3 (scripts/setup.sh
# installs them) and deb-src entries; its output is committed, so nothing
# runs it at build or test time.
#
# Usage: scripts/gen-libomp-type-layouts.sh [VERSION...]   (default 13 14 15 16 19)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${OMPD_INSPECT_CACHE:-/var/cache/ompd-inspect}
out=$here/ompd/llvm/recovery/types
work=$cache/type-layouts
cc=${CC:-clang-19}
cxx=${CXX:-clang++-19}
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(13 14 15 16 19)
mkdir -p "$cache/src" "$out" "$work"

log() { echo "gen: $*" >&2; }

# The probe: the fields ompd-inspect reads (ompd/llvm/debuginfo.go,
# ompd/llvm/depend.go, ompd/llvm/lock.go), then everything the OMPD layout values describe.
probe() {
  cat <<'EOF'
// Written by scripts/gen-libomp-type-layouts.sh: prints the layout of the
// libomp types ompd-inspect reads, as the headers it is compiled against
// define them.
#include "kmp.h"
#include "ompd-specific.h"

#include <cstddef>
#include <cstdio>
#include <cstring>

#define FIELD(T, F)                                                            \
  std::printf("%s %s %zu %zu\n", #T, #F, (size_t)offsetof(T, F),              \
              sizeof(((T *)nullptr)->F));
#define SIZE(T) std::printf("%s - %zu\n", #T, sizeof(T));

// OMPD_FOREACH_SIZEOF names the runtime's types, whose names end in "_t",
// global variables and the primitive types int and char: only the first
// are printed.
static void size_of(const char *name, size_t n) {
  size_t len = std::strlen(name);
  if (len < 2 || std::strcmp(name + len - 2, "_t") != 0)
    return;
  std::printf("%s - %zu\n", name, n);
}
#define OMPD_PROBE_ACCESS(T, F) FIELD(T, F)
#define OMPD_PROBE_SIZEOF(T) size_of(#T, sizeof(T));

int main() {
  // Construct locations.
  FIELD(ident_t, psource)
  FIELD(kmp_base_team_t, t_ident)
  FIELD(kmp_taskdata_t, td_ident)
  // Task ids.
  FIELD(kmp_taskdata_t, td_task_id)
  // Task deques.
  FIELD(kmp_base_info_t, th_task_team)
  FIELD(kmp_base_task_team_t, tt_threads_data)
  FIELD(kmp_base_task_team_t, tt_nproc)
  SIZE(kmp_thread_data_t)
  FIELD(kmp_base_thread_data_t, td_deque)
  FIELD(kmp_base_thread_data_t, td_deque_size)
  FIELD(kmp_base_thread_data_t, td_deque_head)
  FIELD(kmp_base_thread_data_t, td_deque_ntasks)
  // The dependence graph; a kmp_task_t follows its kmp_taskdata_t.
  FIELD(kmp_taskdata_t, td_depnode)
  SIZE(kmp_taskdata_t)
  FIELD(kmp_depnode_t, dn)
  FIELD(kmp_base_depnode_t, successors)
  FIELD(kmp_base_depnode_t, task)
  FIELD(kmp_base_depnode_t, npredecessors)
  FIELD(kmp_depnode_list_t, node)
  FIELD(kmp_depnode_list_t, next)
  // The queuing lock a waiting thread's wait id names (its kind and owner).
  FIELD(kmp_base_queuing_lock_t, initialized)
  FIELD(kmp_base_queuing_lock_t, head_id)
  FIELD(kmp_base_queuing_lock_t, owner_id)
  FIELD(kmp_base_queuing_lock_t, depth_locked)
  FIELD(kmp_base_queuing_lock_t, flags)
  // What the runtime's OMPD layout values give too.
  OMPD_FOREACH_ACCESS(OMPD_PROBE_ACCESS)
  OMPD_FOREACH_SIZEOF(OMPD_PROBE_SIZEOF)
  return 0;
}
EOF
}

# compile_flags BUILD: the arguments of the runtime's compile command for
# kmp_tasking.cpp, without its source, output and dependency files, one a
# line (the first is the compiler).
compile_flags() {
  python3 - "$1/compile_commands.json" <<'EOF'
import json, shlex, sys
for e in json.load(open(sys.argv[1])):
    if not e["file"].endswith("/runtime/src/kmp_tasking.cpp"):
        continue
    args = e.get("arguments") or shlex.split(e["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", "-c", "-MF", "-MT", "-MQ"):
            skip = True
        elif a in ("-MD", "-MMD") or a == e["file"]:
            pass
        else:
            out.append(a)
    print("\n".join(out))
    sys.exit(0)
sys.exit("no compile command for kmp_tasking.cpp")
EOF
}

for v in "${versions[@]}"; do
  cd "$cache/src"
  orig=$(ls llvm-toolchain-"$v"_*.orig.tar.xz 2>/dev/null | head -n1 || true)
  if [ -z "$orig" ]; then
    log "downloading llvm-toolchain-$v"
    apt-get source --download-only "llvm-toolchain-$v" >/dev/null 2>&1
    orig=$(ls llvm-toolchain-"$v"_*.orig.tar.xz | head -n1)
  fi
  top=$( (tar -tJf "$orig" || true) | awk -F/ 'NR==1{print $1; exit}')
  src=$cache/src/$top
  if [ ! -d "$src/openmp/runtime/src" ] || [ ! -d "$src/llvm/cmake" ]; then
    log "extracting openmp/, cmake/ and llvm/cmake/ from $orig"
    # Older releases have no top-level cmake/: extract what there is.
    tar -xJf "$orig" --wildcards "$top/openmp/*" "$top/llvm/cmake/*" "$top/cmake/*" 2>/dev/null ||
      [ -d "$src/openmp/runtime/src" ] || { log "no openmp/ in $orig"; exit 1; }
  fi

  build=$work/$v
  log "configuring libomp $v as Debian does, in $build"
  rm -rf "$build"
  cmake -S "$src/openmp" -B "$build" -G Ninja \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG -g1" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG -g1" \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DLIBOMP_OMPT_SUPPORT=ON -DLIBOMP_OMPD_SUPPORT=ON \
    -DLIBOMP_ENABLE_ASSERTIONS=OFF -DLIBOMP_ENABLE_RTTI=OFF \
    -DLIBOMP_LIBFLAGS=-lm -DOPENMP_ENABLE_LIBOMP_PROFILING=OFF \
    -DOPENMP_ENABLE_LIBOMPTARGET=OFF >"$build.cmake.log" 2>&1 ||
    { log "cmake failed; see $build.cmake.log"; exit 1; }
  cfg=$build/runtime/src/kmp_config.h
  for def in OMPT_SUPPORT OMPD_SUPPORT RELWITHDEBINFO_BUILD; do
    grep -Eq "^#define (LIBOMP_)?$def 1" "$cfg" || { log "$cfg: $def is not 1"; exit 1; }
  done
  ninja -C "$build" libomp-needed-headers >/dev/null

  mapfile -t flags < <(compile_flags "$build")
  probe >"$build/probe.cpp"
  "${flags[@]}" -Wno-invalid-offsetof -o "$build/probe" "$build/probe.cpp"
  "$build/probe" >"$build/probe.out"
  # Every quantity once; the same one printed twice must agree.
  LC_ALL=C sort -u "$build/probe.out" >"$build/probe.sorted"
  dup=$(awk '{ k = $1 " " $2 } seen[k]++ { print k }' "$build/probe.sorted")
  [ -z "$dup" ] || { log "libomp $v: conflicting values for $dup"; exit 1; }
  {
    echo "# libomp $v: layouts of runtime types on x86-64, as Debian builds $orig"
    echo "# (openmp/runtime, OMPT and OMPD on, RelWithDebInfo: KMP_DEBUG); generated by"
    echo "# scripts/gen-libomp-type-layouts.sh from the runtime's headers."
    echo "# TYPE FIELD OFFSET SIZE: the field's offset and size; TYPE - SIZE: the type's size."
    cat "$build/probe.sorted"
  } >"$out/$v.txt.tmp"
  mv "$out/$v.txt.tmp" "$out/$v.txt"
  log "$out/$v.txt: $(grep -vc '^#' "$out/$v.txt") quantities"
done
