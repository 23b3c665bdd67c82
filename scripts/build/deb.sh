#!/usr/bin/env bash
# Builds dist/cridock_<version>_amd64.deb with dpkg-deb from packaging/deb/:
# the self-contained executable (dist/cridock-linux-x64, built first when
# missing or older than the sources) as /usr/bin/cridock, the two systemd
# units in /lib/systemd/system, /etc/default/cridock as a conffile, the
# default CNI network in /usr/share/cridock/cni (postinst copies it to
# /etc/cni/net.d only when that holds no network), the man page, copyright,
# changelog and lintian's overrides. The package's description and changelog
# name the commit the executable was built from (as its --version says it).
# Needs dpkg-dev (dpkg-shlibdeps); no root.
#
# Usage: scripts/build/deb.sh          (npm run build:deb)
# Environment: CRIDOCK_DEB_MAINTAINER  the Maintainer field
#              CRIDOCK_DEB_VERSION     the package's version instead of src/version.ts's (the
#                                      upgrade tests install two builds of one tree over each other)
#              CRIDOCK_DEB_XZ_LEVEL    xz level, 0-9 (default 6: 21.8 MiB, about 50 s of CPU;
#                                      1: 24.3 MiB in about 9 s, what the tests build)
#              SOURCE_DATE_EPOCH       file times (default: the last commit's)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
deb_dir="$repo_root/packaging/deb"
die() { printf 'build-deb: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=scripts/build/version-of.sh
source "$(dirname "${BASH_SOURCE[0]}")/version-of.sh"

command -v dpkg-deb >/dev/null || die "dpkg-deb is missing (package dpkg)"
command -v dpkg-shlibdeps >/dev/null || die "dpkg-shlibdeps is missing (package dpkg-dev)"

source_version="$(sed -n 's/^export const CRIDOCK_VERSION = "\(.*\)";$/\1/p' "$repo_root/src/version.ts")"
# A semantic pre-release (0.2.0-rc.1) is packaged as 0.2.0~rc.1 (see version-of.sh).
version="${CRIDOCK_DEB_VERSION:-$(cridock_debian_version "$source_version")}"
[[ "$version" =~ ^[0-9][0-9A-Za-z.+~-]*$ ]] || die "not a Debian version: '$version' (from CRIDOCK_DEB_VERSION or src/version.ts)"
arch=amd64
binary="$repo_root/dist/cridock-linux-x64"
maintainer="${CRIDOCK_DEB_MAINTAINER:-cridock maintainers <cridock@example.org>}"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$repo_root" log -1 --format=%ct 2>/dev/null || date +%s)}"

# The executable, unless it is newer than every source file it is built from.
if [[ ! -x "$binary" ]] || [[ -n "$(find "$repo_root/src" "$repo_root/proto" "$repo_root/package-lock.json" "$repo_root/scripts/build/node-runtime.json" -newer "$binary" -print -quit)" ]]; then
  (cd "$repo_root" && node_modules/.bin/tsx scripts/build/binary.ts) || die "building $binary failed"
fi

# The version and commit the executable says it is: the package describes what it carries.
read -r binary_version commit < <(cridock_version_of "$binary") || die "$binary --version does not name its version and commit (built outside a git checkout? set CRIDOCK_BUILD_COMMIT and rebuild it)"
[[ -n "${CRIDOCK_DEB_VERSION:-}" || "$binary_version" == "$source_version" ]] || die "$binary is cridock $binary_version, not $source_version: rebuild it (node_modules/.bin/tsx scripts/build/binary.ts)"
# The Node the executable embeds (scripts/build/node-runtime.json), named in the package's description.
node_version="v$(cd "$repo_root" && node_modules/.bin/tsx scripts/build/node-runtime.ts version)"
[[ "$node_version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "cannot tell the pinned Node's version (got '$node_version')"

stage="$(mktemp -d /tmp/cridock-deb.XXXXXX)"
trap 'rm -rf "$stage"' EXIT
pkg="$stage/cridock"
umask 022
install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/lib/systemd/system" "$pkg/etc/default" \
  "$pkg/usr/share/cridock/cni" "$pkg/usr/share/doc/cridock" "$pkg/usr/share/lintian/overrides" "$pkg/usr/share/man/man8"

install -m 0755 "$binary" "$pkg/usr/bin/cridock"
install -m 0644 "$repo_root/packaging/systemd/cridock.socket" "$pkg/lib/systemd/system/cridock.socket"
# The packaged unit runs /usr/bin/cridock and names its man page.
sed -e 's#^ExecStart=/usr/local/bin/cridock #ExecStart=/usr/bin/cridock #' -e 's#^\(Description=.*\)$#\1\nDocumentation=man:cridock(8)#' \
  "$repo_root/packaging/systemd/cridock.service" >"$pkg/lib/systemd/system/cridock.service"
chmod 0644 "$pkg/lib/systemd/system/cridock.service"
grep -q '^ExecStart=/usr/bin/cridock ' "$pkg/lib/systemd/system/cridock.service" || die "cridock.service's ExecStart was not rewritten"
install -m 0644 "$deb_dir/cridock.default" "$pkg/etc/default/cridock"
install -m 0644 "$repo_root"/scripts/cni/* "$pkg/usr/share/cridock/cni/"
install -m 0644 "$deb_dir/copyright" "$pkg/usr/share/doc/cridock/copyright"
[[ -f "$binary.licenses.txt" ]] && install -m 0644 "$binary.licenses.txt" "$pkg/usr/share/doc/cridock/bundled-licenses.txt"
install -m 0644 "$deb_dir/lintian-overrides" "$pkg/usr/share/lintian/overrides/cridock"
gzip -9n <"$deb_dir/cridock.8" >"$pkg/usr/share/man/man8/cridock.8.gz"
# A native package's changelog: one entry for this version.
{
  printf 'cridock (%s) unstable; urgency=medium\n\n' "$version"
  printf '  * cridock %s as a self-contained executable with its systemd units.\n' "$version"
  printf '    Built from commit %s.\n' "$commit"
  printf '  * The executable carries Node.js %s.\n\n' "$node_version"
  printf ' -- %s  %s\n' "$maintainer" "$(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$pkg/usr/share/doc/cridock/changelog.gz"
chmod 0644 "$pkg/usr/share/doc/cridock/changelog.gz" "$pkg/usr/share/man/man8/cridock.8.gz"

install -m 0644 "$deb_dir/conffiles" "$pkg/DEBIAN/conffiles"
for script in preinst postinst prerm postrm; do
  install -m 0755 "$deb_dir/$script" "$pkg/DEBIAN/$script"
done

# The shared libraries the node binary links (libc, libstdc++, libgcc),
# with the versions its symbols need, as dpkg-shlibdeps reads them.
mkdir -p "$stage/shlibs/debian"
printf 'Source: cridock\n\nPackage: cridock\nArchitecture: %s\n' "$arch" >"$stage/shlibs/debian/control"
shlibs="$(cd "$stage/shlibs" && dpkg-shlibdeps -O "$pkg/usr/bin/cridock" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')"
[[ -n "$shlibs" ]] || die "dpkg-shlibdeps found no library dependency of $binary"

(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/md5sums"

installed_size="$(du -sk --apparent-size --exclude=DEBIAN "$pkg" | cut -f1)"
sed -e "s/@VERSION@/$version/" -e "s/@COMMIT@/$commit/" -e "s/@NODE_VERSION@/$node_version/" -e "s/@ARCH@/$arch/" -e "s/@MAINTAINER@/$maintainer/" \
  -e "s/@INSTALLED_SIZE@/$installed_size/" -e "s/@SHLIBS_DEPENDS@/$shlibs/" \
  "$deb_dir/control.in" >"$pkg/DEBIAN/control"

mkdir -p "$repo_root/dist"
out="$repo_root/dist/cridock_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz -z"${CRIDOCK_DEB_XZ_LEVEL:-6}" --build "$pkg" "$out" >/dev/null
printf 'build-deb: %s (%s KiB)\n' "$out" "$(($(stat -c %s "$out") / 1024))" >&2
