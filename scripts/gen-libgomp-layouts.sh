#!/usr/bin/env bash
# gen-libgomp-layouts.sh: writes, for each GCC version given, the x86-64 layout of the GNU libgomp
# structures ompd-inspect reads (ompd/gomp): ompd/gomp/layouts/NN.txt.
#
# No released GCC ships an OMPD library and Debian's libgomp is stripped,
# so ompd/gomp takes its offsets from these tables (checked at run time
# against the offsets libgomp's exported functions use).
#
# For each version it downloads the source package gcc-NN into
# $OMPD_INSPECT_CACHE/src/gcc (default /var/cache/ompd-inspect): from the
# machine's deb-src entries (apt-get source --download-only) when they offer
# gcc-NN (Debian 12: 11, 12), else from the first of the suites bullseye,
# trixie, forky, sid whose source index lists it (its highest version
# there): the .dsc's files from the pool, each checked against the SHA256
# of the signed index (scripts/debian-archive.sh). It then extracts
# only libgomp/ and include/ from the inner gcc-*-dfsg tarball, copies the
# headers libgomp.h includes into a work directory (the libgomp directory,
# then config/linux/x86, config/linux, config/posix: the search order of
# libgomp's own build on x86_64-linux-gnu), substitutes the lock sizes of
# omp.h.in (@OMP_LOCK_SIZE@ ...: the x86-64 values, which change no
# structure read here) and writes a config.h with the settings of Debian's
# x86-64 build that change the structures: HAVE_TLS and
# USING_INITIAL_EXEC_TLS (no gomp_thread.handle), LIBGOMP_USE_PTHREADS
# (gomp_thread.num_teams/team_num, the thread pool), HAVE_SYNC_BUILTINS,
# HAVE_ALIGNED_ALLOC (aligned work shares), HAVE_ATTRIBUTE_VISIBILITY.
# libgomp itself is not configured or built.
#
# A probe, written by this script, includes libgomp.h and prints, one a
# line,
#   TYPE FIELD OFFSET SIZE    offsetof(struct TYPE, FIELD), sizeof the field
#   TYPE - SIZE               sizeof(struct TYPE)
# (for the flexible array gomp_team.implicit_task, the size of one element)
#   enum NAME VALUE           an enumerator's value
# (omp_nest_lock_t, a typedef of an anonymous structure, is printed as
# TYPE FIELD OFFSET SIZE too.) New lines are added at the end, so that the
# committed tables only gain lines.
# It is compiled with gcc (-std=gnu11 -O0) and run. Nothing of GCC is copied
# into the repository; the output is committed, so nothing runs this script
# at build or test time.
#
# The tables committed: 10 (bullseye), 11 and 12 (bookworm), 13 and 14
# (trixie), 16 (forky). 15: its pool files were not reachable (404) when
# this was written.
#
# Needs: gcc, tar, xz-utils, curl, gpgv, debian-archive-keyring; root
# (apt-get) and deb-src entries for the versions of the machine's release.
# Usage: scripts/gen-libgomp-layouts.sh [VERSION...]   (default 11 12)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${OMPD_INSPECT_CACHE:-/var/cache/ompd-inspect}
src=$cache/src/gcc
out=$here/ompd/gomp/layouts
cc=${CC:-gcc}
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(11 12)
mkdir -p "$src" "$out"
deb_dir=$cache/debian
# shellcheck source=scripts/debian-archive.sh
. "$here/scripts/debian-archive.sh"
other_suites=(bullseye trixie forky sid)

log() { echo "gen: $*" >&2; }

# fetch_source V: downloads the source package gcc-V into the current
# directory, from the machine's deb-src entries or another suite.
fetch_source() {
  local v=$1 suite index stanza dir sum size name
  if [[ "$(apt-cache showsrc "gcc-$v" 2>/dev/null || true)" == *"Package: gcc-$v"$'\n'* ]]; then
    log "gcc-$v: downloading the source package (apt-get source)"
    apt-get source --download-only "gcc-$v" >&2
    return
  fi
  for suite in "${other_suites[@]}"; do
    index=$(deb_index "$suite" main/source/Sources.xz)
    stanza=$(deb_stanza "$index" "gcc-$v")
    [ -n "$stanza" ] || continue
    dir=$(deb_field "$stanza" Directory)
    log "gcc-$v: downloading $(deb_field "$stanza" Version) from $suite's $dir"
    local ok=yes
    while read -r sum size name; do
      deb_fetch "$deb_mirror/$dir/$name" "$name" "$sum" || { ok=no; break; }
    done < <(awk '/^Checksums-Sha256:/ { s = 1; next } /^[^ ]/ { s = 0 } s && NF == 3' <<<"$stanza")
    [ "$ok" = yes ] && return
    log "gcc-$v: $suite's files cannot be downloaded: trying the next suite"
  done
  log "gcc-$v: no suite of ${other_suites[*]} has its source package"
  exit 1
}

probe() {
  cat <<'EOF'
/* Written by scripts/gen-libgomp-layouts.sh: prints the layout of the
   libgomp structures ompd-inspect reads. */
#include "libgomp.h"
#include <stdio.h>
#include <stddef.h>

#define F(T, f) printf("%s %s %zu %zu\n", #T, #f, offsetof(struct T, f), sizeof(((struct T *)0)->f))
/* A flexible array member: its offset and the size of one element. */
#define A(T, f) printf("%s %s %zu %zu\n", #T, #f, offsetof(struct T, f), sizeof(((struct T *)0)->f[0]))
#define S(T) printf("%s - %zu\n", #T, sizeof(struct T))
#define E(e) printf("enum %s %d\n", #e, (int)(e))
/* A field of a typedef'd (anonymous) structure. */
#define FT(T, f) printf("%s %s %zu %zu\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f))

int main(void) {
  S(gomp_thread);
  F(gomp_thread, fn); F(gomp_thread, data); F(gomp_thread, ts);
  F(gomp_thread, task); F(gomp_thread, release); F(gomp_thread, place);
  F(gomp_thread, thread_pool);
#ifdef LIBGOMP_USE_PTHREADS
#ifdef GOMP_PROBE_NUM_TEAMS
  F(gomp_thread, num_teams); F(gomp_thread, team_num);
#endif
#endif
  S(gomp_team_state);
  F(gomp_team_state, team); F(gomp_team_state, work_share);
  F(gomp_team_state, last_work_share); F(gomp_team_state, team_id);
  F(gomp_team_state, level); F(gomp_team_state, active_level);
  S(gomp_team);
  F(gomp_team, nthreads); F(gomp_team, prev_ts); F(gomp_team, ordered_release);
  F(gomp_team, barrier); F(gomp_team, task_lock); F(gomp_team, task_queue);
  F(gomp_team, task_count); F(gomp_team, task_queued_count);
  F(gomp_team, task_running_count); F(gomp_team, team_cancelled);
  A(gomp_team, implicit_task);
  S(gomp_barrier_t_probe);
  F(gomp_barrier_t_probe, b.total); F(gomp_barrier_t_probe, b.generation);
  F(gomp_barrier_t_probe, b.awaited); F(gomp_barrier_t_probe, b.awaited_final);
  S(gomp_thread_pool);
  F(gomp_thread_pool, threads); F(gomp_thread_pool, threads_size);
  F(gomp_thread_pool, threads_used); F(gomp_thread_pool, last_team);
  F(gomp_thread_pool, threads_busy); F(gomp_thread_pool, threads_dock);
  S(gomp_task);
  F(gomp_task, parent); F(gomp_task, children_queue); F(gomp_task, taskgroup);
  F(gomp_task, taskwait); F(gomp_task, priority); F(gomp_task, pnode);
  F(gomp_task, icv); F(gomp_task, fn); F(gomp_task, fn_data);
  F(gomp_task, kind); F(gomp_task, in_tied_task); F(gomp_task, final_task);
  S(gomp_task_icv);
  F(gomp_task_icv, nthreads_var); F(gomp_task_icv, run_sched_var);
  F(gomp_task_icv, run_sched_chunk_size); F(gomp_task_icv, default_device_var);
  F(gomp_task_icv, thread_limit_var); F(gomp_task_icv, dyn_var);
#ifdef GOMP_PROBE_MAX_ACTIVE_LEVELS
  F(gomp_task_icv, max_active_levels_var);
#endif
  F(gomp_task_icv, bind_var);
  S(priority_node);
  F(priority_node, next); F(priority_node, prev);
  S(priority_list);
  F(priority_list, priority); F(priority_list, tasks);
  S(priority_queue);
  F(priority_queue, t.root); F(priority_queue, l);
  S(prio_splay_tree_node_s);
  F(prio_splay_tree_node_s, key); F(prio_splay_tree_node_s, left);
  F(prio_splay_tree_node_s, right);
  E(GOMP_TASK_IMPLICIT); E(GOMP_TASK_UNDEFERRED); E(GOMP_TASK_WAITING);
  E(GOMP_TASK_TIED); E(GOMP_TASK_ASYNC_RUNNING);
#ifdef GOMP_PROBE_DETACHED
  E(GOMP_TASK_DETACHED);
#endif
  E(PQ_TEAM); E(PQ_CHILDREN); E(PQ_TASKGROUP);
  E(GFS_RUNTIME); E(GFS_STATIC); E(GFS_DYNAMIC); E(GFS_GUIDED); E(GFS_AUTO);
  E(GFS_MONOTONIC);
  E(omp_proc_bind_false); E(omp_proc_bind_true); E(omp_proc_bind_master);
  E(omp_proc_bind_close); E(omp_proc_bind_spread);
  /* What a waiting thread sleeps on (BlockedOn): the nest lock's futex
     word and owner, a taskwait's and a taskgroup's semaphores. */
  FT(omp_nest_lock_t, lock); FT(omp_nest_lock_t, count); FT(omp_nest_lock_t, owner);
  S(gomp_taskwait);
  F(gomp_taskwait, in_taskwait); F(gomp_taskwait, in_depend_wait);
  F(gomp_taskwait, taskwait_sem);
  S(gomp_taskgroup);
  F(gomp_taskgroup, prev); F(gomp_taskgroup, in_taskgroup_wait);
  F(gomp_taskgroup, taskgroup_sem);
  F(gomp_team, master_release);
  return 0;
}
EOF
}

for v in "${versions[@]}"; do
  cd "$src"
  orig=$(ls gcc-"${v}"_*.orig.tar.* 2>/dev/null | head -1 || true)
  if [ -z "$orig" ]; then
    fetch_source "$v"
    orig=$(ls gcc-"${v}"_*.orig.tar.* | head -1)
  fi
  x=$src/x$v
  if [ ! -d "$x" ] || ! ls -d "$x"/gcc-*/libgomp >/dev/null 2>&1; then
    log "gcc-$v: extracting libgomp/ from $orig"
    rm -rf "$x"; mkdir -p "$x"
    tar -xf "$orig" -C "$x" --wildcards '*/gcc-*-dfsg.tar.xz'
    inner=$(ls "$x"/*/gcc-*-dfsg.tar.xz)
    tar -xJf "$inner" -C "$x" --wildcards '*/libgomp/*' '*/include/*' '*/gcc/BASE-VER'
    rm -f "$inner"
  fi
  top=$(ls -d "$x"/gcc-*/libgomp | head -1); top=${top%/libgomp}
  base=$(cat "$top/gcc/BASE-VER")
  work=$cache/gomp-layouts/$v
  rm -rf "$work"; mkdir -p "$work/inc"
  # libgomp.h's quoted includes search its own directory first: put every
  # header it may include in one directory, in the build's search order
  # (a header of an earlier directory wins).
  for d in config/posix config/linux config/linux/x86 .; do
    cp "$top/libgomp/$d"/*.h "$work/inc/"
  done
  sed -e 's/@OMP_LOCK_SIZE@/4/; s/@OMP_LOCK_ALIGN@/4/; s/@OMP_NEST_LOCK_SIZE@/16/; s/@OMP_NEST_LOCK_ALIGN@/8/' \
    -e 's/@[A-Z0-9_]*@/8/g' "$top/libgomp/omp.h.in" >"$work/inc/omp.h.in"
  echo '#include <stdint.h>' >"$work/inc/gstdint.h"
  cat >"$work/inc/config.h" <<'EOF'
/* The settings of Debian's x86-64 libgomp build that shape its structures. */
#define HAVE_TLS 1
#define USING_INITIAL_EXEC_TLS 1
#define LIBGOMP_USE_PTHREADS 1
#define HAVE_SYNC_BUILTINS 1
#define HAVE_ALIGNED_ALLOC 1
#define HAVE_ATTRIBUTE_VISIBILITY 1
#define HAVE_PTHREAD_H 1
#define HAVE_UNISTD_H 1
#define PIC 1
EOF
  # gomp_barrier_t is a typedef; wrap it in a struct for the F() macro.
  probe | sed 's/#include <stdio.h>/#include <stdio.h>\nstruct gomp_barrier_t_probe { gomp_barrier_t b; };/' >"$work/probe.c"
  # Fields some versions lack: probed only where the header declares them.
  extra=()
  grep -q 'unsigned int num_teams;' "$top/libgomp/libgomp.h" && extra+=(-DGOMP_PROBE_NUM_TEAMS)
  # (GCC 10 has a global gomp_max_active_levels_var, no ICV field.)
  grep -q '[[:space:]]max_active_levels_var;' "$top/libgomp/libgomp.h" && extra+=(-DGOMP_PROBE_MAX_ACTIVE_LEVELS)
  grep -q 'GOMP_TASK_DETACHED' "$top/libgomp/libgomp.h" && extra+=(-DGOMP_PROBE_DETACHED)
  "$cc" -std=gnu11 -O0 -w -I"$work/inc" -I"$top/include" "${extra[@]}" \
    -o "$work/probe" "$work/probe.c" -lpthread 2>"$work/cc.log" || {
    log "gcc-$v: probe does not compile:"; cat "$work/cc.log" >&2; exit 1; }
  {
    echo "# libgomp $base (Debian source package gcc-$v), x86-64: written by scripts/gen-libgomp-layouts.sh"
    "$work/probe"
  } >"$out/$v.txt"
  log "gcc-$v ($base): $(grep -vc '^#' "$out/$v.txt") lines in $out/$v.txt"
done
