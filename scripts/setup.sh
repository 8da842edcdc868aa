#!/usr/bin/env bash
# setup.sh: installs what ompd-inspect needs on Debian 12 (as root) and builds
# an OMPD-enabled libomp 19 from Debian's llvm-toolchain-19 source package
# into a cache outside the repository. Idempotent: a second run does nothing
# that is already done.
#
# Environment:
#   OMPD_INSPECT_CACHE  cache directory (default /var/cache/ompd-inspect)
set -euo pipefail

cache=${OMPD_INSPECT_CACHE:-/var/cache/ompd-inspect}
build=$cache/libomp-19-build
stamp=$build/.ompd-inspect-built

log() { printf 'setup: %s\n' "$*" >&2; }

# gcc: cgo builds the dll backend (ompd/dll); util-linux: setpriv for the
# least-privilege test; llvm-19: llvm-symbolizer-19, an oracle of the DWARF
# tests (clang-19 only recommends it); curl, gpgv, debian-archive-keyring:
# libgomp releases of other suites (below).
need_pkgs=(clang-19 llvm-19 libomp-19-dev gdb cmake ninja-build dpkg-dev xz-utils make gcc libc6-dev libc6-dbg util-linux debuginfod gfortran-12 gcc-11 curl gpgv debian-archive-keyring)
missing=()
for p in "${need_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# The libomp source package comes from the archive the machine already uses
# for its release's main component: a deb-src entry for it is added only
# when the apt sources have none.
srclist=/etc/apt/sources.list.d/ompd-inspect-deb-src.sources
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
targets=$(apt-get indextargets --format '$(TARGET_OF) $(RELEASE) $(COMPONENT) $(REPO_URI)' | sort -u)
uri=$(awk -v c="$codename" '$1 == "deb" && $2 == c && $3 == "main" { print $4; exit }' <<<"$targets")
added=no
if [ ! -f "$stamp" ] && ! awk -v c="$codename" -v u="$uri" '$1 == "deb-src" && $2 == c && $3 == "main" && $4 == u { f = 1 } END { exit !f }' <<<"$targets"; then
  if [ -z "$codename" ] || [ -z "$uri" ]; then
    log "no apt source for ${codename:-this release}'s main component: add one (deb and deb-src) and run setup again"
    exit 1
  fi
  log "adding a deb-src entry for $codename main from $uri ($srclist)"
  {
    echo "Types: deb-src"
    echo "URIs: $uri"
    echo "Suites: $codename"
    echo "Components: main"
    if [ -f /usr/share/keyrings/debian-archive-keyring.gpg ]; then
      echo "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    fi
  } >"$srclist"
  added=yes
fi

if [ ${#missing[@]} -gt 0 ] || [ "$added" = yes ]; then
  log "apt-get update"
  apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Debian's stock libomp packages conflict with each other: each is
# extracted into its own directory of the cache instead of installed
# ($cache/stock/libomp5-NN/usr/lib/llvm-NN/lib/libomp.so.5), with the OMPD
# library of the same release (libomp-NN-dev; 13 ships none) beside it,
# where the runtime's ompd_dll_locations points.
fetch_deb() { # fetch_deb PACKAGE DIR: downloads PACKAGE's .deb into DIR
  (cd "$2" && apt-get download "$1" >/dev/null 2>&1) || { apt-get update -qq && (cd "$2" && apt-get download "$1" >/dev/null); }
}
for v in 13 14 15 16 19; do
  dir=$cache/stock/libomp5-$v
  libdir=$dir/usr/lib/llvm-$v/lib
  if [ ! -f "$libdir/libomp.so.5" ]; then
    log "extracting Debian's libomp5-$v into $dir"
    tmp=$(mktemp -d)
    fetch_deb "libomp5-$v" "$tmp"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    dpkg-deb -x "$tmp"/libomp5-"$v"_*.deb "$dir.tmp"
    rm -rf "$tmp" "$dir" && mv "$dir.tmp" "$dir"
  fi
  if [ "$v" != 13 ] && [ ! -f "$libdir/libompd.so" ]; then
    log "extracting libompd.so of Debian's libomp-$v-dev into $libdir"
    tmp=$(mktemp -d)
    fetch_deb "libomp-$v-dev" "$tmp"
    dpkg-deb -x "$tmp"/libomp-"$v"-dev_*.deb "$tmp/root"
    cp "$tmp/root/usr/lib/llvm-$v/lib/libompd.so" "$libdir/libompd.so.tmp"
    mv "$libdir/libompd.so.tmp" "$libdir/libompd.so"
    rm -rf "$tmp"
  fi
done

# GNU libgomp of other GCC releases than Debian 12's (12.2), for ompd/gomp's
# tests: Debian's libgomp1 of another suite, extracted into
# $cache/stock/libgomp1-NN (usr/lib/x86_64-linux-gnu/libgomp.so.1; a
# program runs on it with LD_LIBRARY_PATH). apt-get download reaches only
# this machine's suites: the .deb comes from the pool, located and checked
# (SHA256) by the suite's signed Packages index (scripts/debian-archive.sh).
# Each suite's libgomp1 is its newest GCC's. 14's and 16's need glibc 2.38
# (__isoc23_strtol...): they run on Debian 12's 2.36 through
# fixture.LibgompEnv (a shim for those functions), 10's as they are.
deb_dir=$cache/debian
# shellcheck source=scripts/debian-archive.sh
. "$(cd "$(dirname "$0")" && pwd)/debian-archive.sh"
for vs in 10:bullseye 14:trixie 16:forky; do
  v=${vs%%:*} suite=${vs#*:}
  dir=$cache/stock/libgomp1-$v
  [ -f "$dir/usr/lib/x86_64-linux-gnu/libgomp.so.1" ] && continue
  rm -f "$deb_dir/$suite/main_binary-amd64_Packages" # the suite's current index
  index=$(deb_index "$suite" main/binary-amd64/Packages.xz)
  stanza=$(deb_stanza "$index" libgomp1 amd64)
  src=$(deb_field "$stanza" Source)
  if [ "$src" != "gcc-$v" ]; then
    log "$suite's libgomp1 comes from ${src:-nowhere}, not gcc-$v: update setup.sh's list of libgomp releases"
    exit 1
  fi
  log "extracting $suite's libgomp1 $(deb_field "$stanza" Version) into $dir"
  tmp=$(mktemp -d)
  deb_fetch "$deb_mirror/$(deb_field "$stanza" Filename)" "$tmp/libgomp1.deb" "$(deb_field "$stanza" SHA256)"
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  dpkg-deb -x "$tmp/libgomp1.deb" "$dir.tmp"
  rm -rf "$tmp" "$dir" && mv "$dir.tmp" "$dir"
done

if [ -f "$stamp" ] && [ -f "$build/runtime/src/libomp.so" ] && [ -f "$build/libompd/src/libompd.so" ]; then
  log "OMPD-enabled libomp already built in $build"
  exit 0
fi

mkdir -p "$cache/src"
cd "$cache/src"
orig=$(ls llvm-toolchain-19_*.orig.tar.xz 2>/dev/null | head -n1 || true)
if [ -z "$orig" ]; then
  log "downloading the llvm-toolchain-19 source package"
  apt-get source --download-only llvm-toolchain-19 >/dev/null
  orig=$(ls llvm-toolchain-19_*.orig.tar.xz | head -n1)
fi
top=$( (tar -tJf "$orig" || true) | awk -F/ 'NR==1{print $1; exit}')
if [ ! -d "$top/openmp" ] || [ ! -d "$top/llvm/cmake" ]; then
  log "extracting openmp/, cmake/ and llvm/cmake/ from $orig"
  tar -xJf "$orig" --wildcards "$top/openmp/*" "$top/cmake/*" "$top/llvm/cmake/*"
fi

log "building libomp with OMPT and OMPD into $build"
mkdir -p "$build"
cmake -S "$cache/src/$top/openmp" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
  -DLIBOMP_OMPD_SUPPORT=ON -DLIBOMP_OMPT_SUPPORT=ON \
  -DOPENMP_ENABLE_LIBOMPTARGET=OFF -DOPENMP_STANDALONE_BUILD=ON >/dev/null
ninja -C "$build" >/dev/null
touch "$stamp"
log "done: $build/runtime/src/libomp.so"
