#!/usr/bin/env bash
# Makes a release of cridock in one command, from a clean checkout of the
# commit to release: checks VERSION (scripts/build/release-checks.ts: a
# semantic version, package.json's and src/version.ts's, with its
# CHANGELOG.md entry, nothing uncommitted), builds the self-contained
# executable afresh (so it names this commit), the .deb (deb.sh) and the
# tarball (tarball.sh), and writes them with their SHA-256 checksums to
# dist/release/VERSION/:
#   cridock_<debian version>_amd64.deb  cridock-VERSION-linux-amd64.tar.gz  SHA256SUMS
# (`sha256sum -c SHA256SUMS` there verifies them). Tagging and publishing
# are left to the person releasing (docs/releasing.md).
#
# Usage: scripts/build/release.sh VERSION     (npm run release -- VERSION)
# Needs what deb.sh and tarball.sh need (dpkg-dev), and git.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
die() { printf 'release: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=scripts/build/version-of.sh
source "$(dirname "${BASH_SOURCE[0]}")/version-of.sh"

[[ $# -eq 1 ]] || die "usage: scripts/build/release.sh VERSION (a semantic version, as 0.2.0)"
version="$1"
cd "$repo_root"
command -v git >/dev/null || die "git is missing: a release names its commit"
command -v sha256sum >/dev/null || die "sha256sum is missing (package coreutils)"
node_modules/.bin/tsx scripts/build/release-checks.ts "$version" || die "not releasing $version (see above)"
head="$(git rev-parse HEAD)"

# Afresh, whatever dist/ holds: the executable bakes in the commit it is built from.
node_modules/.bin/tsx scripts/build/binary.ts || die "building the executable failed"
read -r binary_version commit < <(cridock_version_of dist/cridock-linux-x64) || die "dist/cridock-linux-x64 --version does not name its version and commit"
[[ "$binary_version" == "$version" && "$commit" == "$head" ]] ||
  die "dist/cridock-linux-x64 says cridock $binary_version, commit $commit; the release is $version at $head"
bash scripts/build/deb.sh
bash scripts/build/tarball.sh

deb="cridock_$(cridock_debian_version "$version")_amd64.deb"
tarball="cridock-$version-linux-amd64.tar.gz"
out="dist/release/$version"
rm -rf "$out"
mkdir -p "$out"
cp "dist/$deb" "dist/$tarball" "$out/"
(cd "$out" && sha256sum -- "$deb" "$tarball" >SHA256SUMS && sha256sum --quiet -c SHA256SUMS) || die "checksumming $out failed"
# The builds write only under dist/ (ignored): a tree changed by them is a bug to fix first.
[[ -z "$(git status --porcelain)" ]] || die "building changed the tree: $(git status --porcelain | head -n 3 | tr '\n' ' ')"

printf 'release: cridock %s (commit %s) in %s:\n' "$version" "$head" "$out" >&2
sed 's/^/  /' "$out/SHA256SUMS" >&2
printf 'release: next, tag it: git tag -a v%s -m "cridock %s" %s\n' "$version" "$version" "$head" >&2
