#!/usr/bin/env bash
# Makes ftl's Debian packages from a build folder: scripts/build-deb.sh BUILD [OUTDIR] (default
# BUILD/deb). What a Debian maintainer's tools would make, without debhelper: libftl0 (the shared
# library, with its shlibs file and ldconfig trigger), libftl-dev (headers, the .so link, libftl.a,
# ftl.pc, the CMake package), ftl (the command, man pages, docs), python3-ftl (the binding), and
# libftl0-dbgsym and ftl-dbgsym (the debug symbols split off the stripped binaries).
#
# The files come from `cmake --install BUILD --component deb-<package>` (cmake/install.cmake: the
# Debian layout, prefix /usr, multiarch library folder); the control fields, copyright and
# changelog from packaging/; dependencies from dpkg-shlibdeps, control files from dpkg-gencontrol,
# the packages from dpkg-deb (owner root, no fakeroot needed). The Debian version is the newest
# entry of packaging/changelog, whose upstream part must be the build's project version.
#
# Not here: building ftl (scripts/build.sh), signing, a source package. The CUDA runtime and NCCL
# are loaded at run time (rendezvous/gpu_cuda.c), never linked, so the packages install and load
# on a CPU node: libftl0 Suggests the packages that provide them (BUILD/packaging-deb/gpu-suggests,
# NVIDIA's names for the build's toolkit; FTL_DEB_GPU_SUGGESTS replaces them). An ELF file that
# NEEDs a library no Debian package owns (one under /usr/local) is refused: its package would not
# load where that library is missing. lintian overrides: packaging/lintian-overrides, each with why.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: scripts/build-deb.sh BUILD [OUTDIR]" >&2; exit 2; }
BUILD=$(cd "$1" && pwd)
OUTDIR=${2:-$BUILD/deb}
PACKAGES="libftl0 libftl-dev ftl python3-ftl"
DBGSYM_OF="libftl0 ftl"

die() {
  echo "build-deb: $*" >&2
  exit 1
}
for tool in dpkg-deb dpkg-gencontrol dpkg-shlibdeps dpkg-parsechangelog dpkg-architecture objcopy strip readelf; do
  command -v "$tool" >/dev/null || die "$tool is missing (packages dpkg-dev, binutils)"
done
cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
[ -f "$BUILD/CMakeCache.txt" ] || die "$BUILD is not a configured build folder"
[ -z "$(cache FTL_SANITIZE)" ] || die "$BUILD is a sanitizer build (FTL_SANITIZE=$(cache FTL_SANITIZE)); package a normal one"
[ -d "$BUILD/packaging-deb" ] || die "$BUILD has no Debian layout (cmake/install.cmake: no multiarch folder known at configure)"
VERSION=$(cache CMAKE_PROJECT_VERSION)
DEBVER=$(dpkg-parsechangelog -l "$ROOT/packaging/changelog" -S Version)
[ "${DEBVER%-*}" = "$VERSION" ] ||
  die "packaging/changelog's newest entry is $DEBVER, the build's version is $VERSION: add a changelog entry"
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ftl-deb.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/debian" "$OUTDIR"
cp "$ROOT/packaging/control" "$WORK/debian/control"
cp "$ROOT/packaging/changelog" "$WORK/debian/changelog"
cd "$WORK"

# 1. The files, one package folder each (debian/<package>, as dpkg-shlibdeps expects).
for p in $PACKAGES; do
  DESTDIR=$WORK/debian/$p cmake --install "$BUILD" --prefix /usr --component "deb-$p" >"install-$p.log" 2>&1 ||
    { cat "install-$p.log" >&2; die "cmake --install --component deb-$p failed"; }
  [ -n "$(find "debian/$p" -type f -print -quit)" ] || die "component deb-$p installed nothing"
  doc=debian/$p/usr/share/doc/$p
  mkdir -p "$doc"
  install -m 0644 "$ROOT/packaging/copyright" "$doc/copyright"
  gzip -9n -c "$ROOT/packaging/changelog" >"$doc/changelog.Debian.gz"
  mkdir -p "debian/$p/usr/share/lintian/overrides"
  install -m 0644 "$ROOT/packaging/lintian-overrides" "debian/$p/usr/share/lintian/overrides/$p"
done
[ -f "debian/libftl0/usr/lib/$MA/libftl.so.${VERSION%%.*}" ] || die "libftl.so.${VERSION%%.*} is not in usr/lib/$MA"
find debian/ftl/usr/share/man -type f ! -name '*.gz' -exec gzip -9n {} +

# 2. Owner root (dpkg-deb --root-owner-group), directories 0755, files 0644, programs 0755.
find debian -type d -exec chmod 0755 {} +
find debian -type f -exec chmod 0644 {} +
chmod 0755 debian/ftl/usr/bin/* debian/ftl/usr/libexec/ftl/*

# 3. Strip, the debug symbols into <package>-dbgsym (usr/lib/debug/.build-id/NN/REST.debug), as
# dh_strip does; libftl.a keeps its symbols but not its debug information.
for p in $DBGSYM_OF; do
  ids=""
  while IFS= read -r -d '' f; do
    readelf -h "$f" >/dev/null 2>&1 || continue
    id=$(LC_ALL=C readelf -n "$f" | sed -n 's/^ *Build ID: *\([0-9a-f]*\)$/\1/p')
    [ -n "$id" ] || die "$f has no build id"
    dbg=debian/$p-dbgsym/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
    mkdir -p "$(dirname "$dbg")"
    objcopy --only-keep-debug --compress-debug-sections "$f" "$dbg"
    chmod 0644 "$dbg"
    case $f in
      *.so | *.so.*) strip --remove-section=.comment --remove-section=.note --strip-unneeded "$f" ;;
      *) strip --remove-section=.comment --remove-section=.note "$f" ;;
    esac
    objcopy --add-gnu-debuglink="$dbg" "$f"
    ids="$ids${ids:+ }$id"
  done < <(find "debian/$p" -type f ! -name '*.a' -print0 | LC_ALL=C sort -z)
  [ -n "$ids" ] || die "no ELF files in $p"
  echo "$ids" >"dbgsym-$p.ids"
  mkdir -p "debian/$p-dbgsym/usr/share/doc"
  ln -s "$p" "debian/$p-dbgsym/usr/share/doc/$p-dbgsym"
done
find debian/libftl-dev -name '*.a' -exec strip --strip-debug --remove-section=.comment --remove-section=.note \
  --enable-deterministic-archives {} +

# 4. libftl0's shlibs file and ldconfig trigger; the dependencies of the ELF files.
mkdir -p debian/libftl0/DEBIAN
echo "libftl ${VERSION%%.*} libftl0 (>= ${DEBVER%-*})" >debian/libftl0/DEBIAN/shlibs
echo "activate-noawait ldconfig" >debian/libftl0/DEBIAN/triggers
for p in $PACKAGES; do : >"debian/$p.substvars"; done
[ -z "${FTL_DEB_GPU_DEPENDS:-}" ] ||
  die "FTL_DEB_GPU_DEPENDS is gone: libftl0 loads the CUDA runtime and NCCL at run time and Suggests their packages (FTL_DEB_GPU_SUGGESTS)"
echo "gpu:Suggests=${FTL_DEB_GPU_SUGGESTS-$(cat "$BUILD/packaging-deb/gpu-suggests" 2>/dev/null)}" >>debian/libftl0.substvars
for p in libftl0 ftl; do
  mapfile -t elves < <(find "debian/$p" -type f \( -path '*/bin/*' -o -path '*/libexec/*' -o -name '*.so.*' \) | LC_ALL=C sort)
  dpkg-shlibdeps --ignore-missing-info -T"debian/$p.substvars" "${elves[@]}" 2>"shlibdeps-$p.log" ||
    { cat "shlibdeps-$p.log" >&2; die "dpkg-shlibdeps failed for $p"; }
  # --ignore-missing-info passes over a library that no package owns (a CUDA runtime or NCCL
  # under /usr/local): it then gives no dependency, and the package fails to load where that
  # library is missing. Refuse it (the GPU libraries are loaded at run time, not linked).
  unowned=""
  ldconfig -p >ldconfig.txt
  for lib in $(readelf -d "${elves[@]}" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u); do
    path=$(awk -v n="$lib" '$1 == n && /x86-64|64bit/ && !p { p = $NF } END { print p }' ldconfig.txt)
    [ -n "$path" ] || continue
    dpkg -S "$path" >/dev/null 2>&1 || dpkg -S "$(readlink -f "$path")" >/dev/null 2>&1 || unowned="$unowned $path"
  done
  [ -z "$unowned" ] ||
    die "$p's ELF files need$unowned, which no Debian package owns: the package would not load without them"
done

# 5. Control files, md5sums, and the packages.
for p in $PACKAGES; do
  mkdir -p "debian/$p/DEBIAN"
  dpkg-gencontrol -p"$p" -P"debian/$p" -T"debian/$p.substvars" -fdebian/files 2>>gencontrol.log ||
    { cat gencontrol.log >&2; die "dpkg-gencontrol failed for $p"; }
done
for p in $DBGSYM_OF; do
  multiarch=$(sed -n 's/^Multi-Arch: //p' "debian/$p/DEBIAN/control")
  mkdir -p "debian/$p-dbgsym/DEBIAN"
  : >"debian/$p-dbgsym.substvars"
  # shellcheck disable=SC2046
  dpkg-gencontrol -p"$p" -P"debian/$p-dbgsym" -T"debian/$p-dbgsym.substvars" -fdebian/files \
    -DPackage="$p-dbgsym" -DDepends="$p (= $DEBVER)" -DSection=debug -DPriority=optional \
    -DAuto-Built-Package=debug-symbols -DDescription="debug symbols for $p" -DBuild-Ids="$(cat "dbgsym-$p.ids")" \
    -UPre-Depends -URecommends -USuggests -UEnhances -UProvides -UReplaces -UBreaks -UConflicts \
    $([ "$multiarch" = same ] || echo -UMulti-Arch) 2>>gencontrol.log ||
    { cat gencontrol.log >&2; die "dpkg-gencontrol failed for $p-dbgsym"; }
done
for p in $PACKAGES $(for q in $DBGSYM_OF; do echo "$q-dbgsym"; done); do
  (cd "debian/$p" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0r md5sum) \
    >"debian/$p/DEBIAN/md5sums"
  chmod 0644 "debian/$p/DEBIAN/"*
  dpkg-deb --root-owner-group -Zxz --build "debian/$p" "$OUTDIR" >/dev/null
done
ls "$OUTDIR"/*_"${DEBVER}"_*.deb
