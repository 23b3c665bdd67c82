#!/usr/bin/env bash
# Builds dist/cridock-<version>-linux-amd64.tar.gz, for nodes that are not
# Debian: the self-contained executable (built first when missing or older
# than the sources), the two systemd units (ExecStart=/usr/local/bin/cridock,
# where its README installs it), /etc/default/cridock's template, the default
# CNI network, a README with the install steps (and the commit the executable
# was built from), and the bundled packages' licences, in one folder
# cridock-<version>-linux-amd64/.
#
# Usage: scripts/build/tarball.sh      (npm run build:tarball)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
die() { printf 'build-tarball: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=scripts/build/version-of.sh
source "$(dirname "${BASH_SOURCE[0]}")/version-of.sh"

version="$(sed -n 's/^export const CRIDOCK_VERSION = "\(.*\)";$/\1/p' "$repo_root/src/version.ts")"
[[ "$version" =~ ^[0-9][0-9A-Za-z.+~-]*$ ]] || die "cannot read the version from src/version.ts (got '$version')"
binary="$repo_root/dist/cridock-linux-x64"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$repo_root" log -1 --format=%ct 2>/dev/null || date +%s)}"

if [[ ! -x "$binary" ]] || [[ -n "$(find "$repo_root/src" "$repo_root/proto" "$repo_root/package-lock.json" -newer "$binary" -print -quit)" ]]; then
  (cd "$repo_root" && node_modules/.bin/tsx scripts/build/binary.ts) || die "building $binary failed"
fi

# The version and commit the executable says it is: the README names what the tarball carries.
read -r binary_version commit < <(cridock_version_of "$binary") || die "$binary --version does not name its version and commit (built outside a git checkout? set CRIDOCK_BUILD_COMMIT and rebuild it)"
[[ "$binary_version" == "$version" ]] || die "$binary is cridock $binary_version, not $version: rebuild it (node_modules/.bin/tsx scripts/build/binary.ts)"

name="cridock-$version-linux-amd64"
stage="$(mktemp -d /tmp/cridock-tarball.XXXXXX)"
trap 'rm -rf "$stage"' EXIT
dir="$stage/$name"
umask 022
install -d "$dir/cni"
install -m 0755 "$binary" "$dir/cridock"
install -m 0644 "$repo_root/packaging/systemd/cridock.socket" "$repo_root/packaging/systemd/cridock.service" "$dir/"
install -m 0644 "$repo_root/packaging/deb/cridock.default" "$dir/cridock.default"
install -m 0644 "$repo_root"/scripts/cni/* "$dir/cni/"
sed -e "s/@VERSION@/$version/" -e "s/@COMMIT@/$commit/" "$repo_root/packaging/tarball/README.md" >"$dir/README.md"
[[ -f "$binary.licenses.txt" ]] && install -m 0644 "$binary.licenses.txt" "$dir/bundled-licenses.txt"

mkdir -p "$repo_root/dist"
out="$repo_root/dist/$name.tar.gz"
# Same bytes for the same inputs: sorted names, fixed owner and times.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" -C "$stage" -cf - "$name" | gzip -6n >"$out"
printf 'build-tarball: %s (%s KiB)\n' "$out" "$(($(stat -c %s "$out") / 1024))" >&2
