#!/usr/bin/env bash
# Builds containerd 2.x and its runc shim from the Go module proxy, for the
# node benchmark's third column only (scripts/bench/kubelet-pods.ts
# --compare-containerd DIR): containerd's own CRI plugin is the floor a node
# without Docker pays. Nothing of it is part of cridock or its tests.
#
#   bash scripts/bench/build-containerd.sh [VERSION]   (default v2.4.2)
#
# Prints the directory that holds `containerd` and `containerd-shim-runc-v2`:
# ${CRIDOCK_TOOLS_DIR:-/var/cache/cridock-tools}/containerd/VERSION/bin, kept
# there (keyed by the version) for the next run. Static builds (CGO off)
# without the snapshotters this host cannot use (btrfs, devmapper, zfs).
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../env/common.sh"

version="${1:-v2.4.2}"
[[ "$version" =~ ^v2\.[0-9]+\.[0-9]+$ ]] || die "containerd version $version: v2.X.Y wanted"
module="github.com/containerd/containerd/v2"
out="$CRIDOCK_TOOLS_DIR/containerd/$version/bin"

if [[ ! -x "$out/containerd" || ! -x "$out/containerd-shim-runc-v2" ]]; then
  tool_lock "containerd-$version"
  go="$(find_go "containerd's build")"
  scratch="$(mktemp -d /tmp/cridock-containerd.XXXXXX)"
  trap 'rm -rf "$scratch"' EXIT
  mkdir -p "$ENV_LOG_DIR"
  log "building containerd $version and its runc shim (a few minutes; log: $ENV_LOG_DIR/containerd-build.log)"
  module_copy "$go" "$module@$version" "$scratch/src"
  ldflags="-X $module/version.Version=$version"
  (
    cd "$scratch/src"
    CGO_ENABLED=0 "$go" build -mod=mod -trimpath -tags "no_btrfs no_devmapper no_zfs" -ldflags "$ldflags" -o "$scratch/containerd" ./cmd/containerd
    CGO_ENABLED=0 "$go" build -mod=mod -trimpath -ldflags "$ldflags" -o "$scratch/containerd-shim-runc-v2" ./cmd/containerd-shim-runc-v2
  ) </dev/null >>"$ENV_LOG_DIR/containerd-build.log" 2>&1 || die "building containerd $version failed; see $ENV_LOG_DIR/containerd-build.log"
  mkdir -p "$out"
  install -m 0755 "$scratch/containerd" "$scratch/containerd-shim-runc-v2" "$out/"
  log "installed containerd $version in $out"
fi
echo "$out"
