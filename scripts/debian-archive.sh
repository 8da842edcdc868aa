# debian-archive.sh: functions to fetch files of another Debian suite's
# archive than the machine's apt sources (apt-get source and apt-get
# download reach only those), sourced by scripts/gen-libgomp-layouts.sh and
# scripts/setup.sh.
#
# Every file is verified as apt verifies it: the suite's InRelease with
# gpgv against debian-archive-keyring (Debian 12's keyring holds the keys of
# bullseye to trixie, which sign bullseye, trixie, forky and sid), an index
# (Sources.xz, Packages.xz) by its SHA256 in the signed InRelease, a pool
# file by its SHA256 in the index. Valid-Until is not checked: the indexes
# only locate and check files of released packages.
#
# Environment: DEBIAN_MIRROR (default https://deb.debian.org/debian).
# The caller sets deb_dir, the directory indexes are kept in.

deb_mirror=${DEBIAN_MIRROR:-https://deb.debian.org/debian}
deb_keyring=/usr/share/keyrings/debian-archive-keyring.gpg

# deb_index SUITE PATH: prints the path of the suite's index PATH
# (main/source/Sources.xz, main/binary-amd64/Packages.xz), uncompressed and
# verified, downloading it if it is not in $deb_dir/SUITE yet.
deb_index() {
  local suite=$1 path=$2 d=$deb_dir/$1
  local out=$d/${path//\//_}
  out=${out%.xz}
  if [ -f "$out" ]; then
    echo "$out"
    return 0
  fi
  mkdir -p "$d"
  curl -fsSL --proto '=https' -o "$d/InRelease.tmp" "$deb_mirror/dists/$suite/InRelease" || { rm -f "$d/InRelease.tmp"; return 1; }
  gpgv --keyring "$deb_keyring" --output "$d/Release" "$d/InRelease.tmp" 2>"$d/gpgv.log" || {
    echo "debian-archive: $suite's InRelease is not signed by a key of $deb_keyring:" >&2
    cat "$d/gpgv.log" >&2
    return 1
  }
  rm -f "$d/InRelease.tmp"
  local want
  want=$(awk -v p="$path" '/^SHA256:/ { s = 1; next } /^[^ ]/ { s = 0 } s && $3 == p { print $1; exit }' "$d/Release")
  [ -n "$want" ] || { echo "debian-archive: $suite's Release lists no $path" >&2; return 1; }
  curl -fsSL --proto '=https' -o "$out.xz.tmp" "$deb_mirror/dists/$suite/$path" || { rm -f "$out.xz.tmp"; return 1; }
  deb_check "$out.xz.tmp" "$want" || return 1
  xz -dc "$out.xz.tmp" >"$out.tmp" && mv "$out.tmp" "$out" && rm -f "$out.xz.tmp"
  echo "$out"
}

# deb_check FILE SHA256: fails (and removes FILE) unless FILE has SHA256.
deb_check() {
  local got
  got=$(sha256sum "$1" | awk '{ print $1 }')
  if [ "$got" != "$2" ]; then
    echo "debian-archive: $1: sha256 $got, the index says $2" >&2
    rm -f "$1"
    return 1
  fi
}

# deb_stanza INDEX PACKAGE [ARCH]: prints the stanza of PACKAGE's highest
# version in INDEX (an index may list several versions), of architecture
# ARCH for a Packages index; nothing when INDEX has no PACKAGE.
deb_stanza() {
  local index=$1 pkg=$2 arch=${3:-} best="" v
  for v in $(awk -v p="$pkg" -v a="$arch" '
      /^Package: / { n = $2; ver = ""; ar = "" }
      /^Version: / { ver = $2 }
      /^Architecture: / { ar = $2 }
      /^$/ { if (n == p && ver != "" && (a == "" || ar == a)) print ver; n = "" }
      END { if (n == p && ver != "" && (a == "" || ar == a)) print ver }' "$index"); do
    if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
  done
  [ -n "$best" ] || return 0
  awk -v p="$pkg" -v v="$best" -v a="$arch" '
    /^$/ { if (n == p && ver == v && (a == "" || ar == a)) { printf "%s", buf; exit } buf = ""; n = ""; ver = ""; ar = ""; next }
    { buf = buf $0 "\n" }
    /^Package: / { n = $2 }
    /^Version: / { ver = $2 }
    /^Architecture: / { ar = $2 }
    END { if (n == p && ver == v && (a == "" || ar == a)) printf "%s", buf }' "$index"
}

# deb_field STANZA FIELD: prints a one-line field of a stanza.
deb_field() {
  awk -v f="$2:" '$1 == f { print $2; exit }' <<<"$1"
}

# deb_fetch URL DEST SHA256: downloads URL to DEST unless DEST already has
# SHA256, and verifies it.
deb_fetch() {
  if [ -f "$2" ] && [ "$(sha256sum "$2" | awk '{ print $1 }')" = "$3" ]; then
    return 0
  fi
  curl -fsSL --proto '=https' -o "$2.tmp" "$1" || { rm -f "$2.tmp"; return 1; }
  deb_check "$2.tmp" "$3" || return 1
  mv "$2.tmp" "$2"
}
