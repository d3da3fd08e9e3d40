#!/usr/bin/env bash
# Builds the Debian package the Debian way and tests what it installs:
#
#   1. dpkg-buildpackage -us -uc -b in a copy of the source tree (the .debs
#      land next to that copy, not in the checkout), giving
#      postgresql-<major>-ratelimit_<version>_<arch>.deb for each major in
#      debian/pgversions installed here;
#   2. dpkg -i of the package, then a check that the extension's installed
#      files are the package's own (dpkg --verify);
#   3. debian/tests/installcheck, the package's autopkgtest: pg_buildext
#      installcheck runs pg_regress and the isolation specs against the
#      installed files in a throwaway cluster made by pg_virtualenv (which
#      creates, starts, stops and removes it).
#
# The package stays installed: it holds the same files `make install` puts
# in the same places.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
RATELIMIT_PACKAGES=(debhelper dpkg-dev postgresql-server-dev-all)
ensure_packages

version=$(dpkg-parsechangelog -l debian/changelog -S Version)
arch=$(dpkg-architecture -q DEB_HOST_ARCH)
work=$(mktemp -d /tmp/ratelimit-package.XXXXXX)
trap 'rm -rf "$work"' EXIT
src="$work/ratelimit-${version%-*}"
mkdir "$src"
# The source as checked in plus the working tree's changes, without build output.
tar -c --exclude=./.git --exclude=./build --exclude='./build-*' --exclude='*.o' --exclude='*.so' \
    --exclude=./results --exclude=./output_iso --exclude=./regression.diffs --exclude=./regression.out . |
  tar -x -C "$src"

echo "-- dpkg-buildpackage -us -uc -b (ratelimit $version)"
(cd "$src" && dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1) || { tail -40 "$work/build.log"; exit 1; }
mapfile -t debs < <(ls "$work"/postgresql-*-ratelimit_"${version}"_"$arch".deb)
[ ${#debs[@]} -gt 0 ] || { echo "no postgresql-*-ratelimit_${version}_$arch.deb was built" >&2; exit 1; }
for deb in "${debs[@]}"; do
  echo "-- built $(basename "$deb"):"
  dpkg-deb --contents "$deb" | awk '{ print "     " $6 }' | grep -E 'ratelimit(\.so|\.control|--)' | head -20
done

echo "-- dpkg -i"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo dpkg -i "${debs[@]}" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; exit 1; }
for deb in "${debs[@]}"; do
  pkg=$(dpkg-deb -f "$deb" Package)
  so=$(dpkg -L "$pkg" | grep '/ratelimit\.so$')
  owner=$(dpkg -S "$so" | cut -d: -f1)
  [ "$owner" = "$pkg" ] || { echo "$so belongs to $owner, not $pkg" >&2; exit 1; }
  # No installed file differs from the package's.
  if ! dpkg --verify "$pkg"; then echo "$pkg's installed files differ from the package" >&2; exit 1; fi
  echo "   $pkg $(dpkg-query -W -f='${Version}' "$pkg") installed; $so is its own"
done

echo "-- debian/tests/installcheck (pg_buildext installcheck in pg_virtualenv)"
(cd "$src" && debian/tests/installcheck) >"$work/installcheck.log" 2>&1 || {
  tail -60 "$work/installcheck.log"; exit 1; }
grep -E '^(### |# |test |.*tests passed)' "$work/installcheck.log" | grep -vE '^test .* ok ' | head -20
