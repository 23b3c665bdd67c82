#!/usr/bin/env bash
# Builds the images Kubernetes' e2e suites pull
# (scripts/env/images/conformance-images.ts) from the programs
# scripts/env/install-kubernetes-tests.sh built, from Debian binaries and from
# upstream busybox built here, and pushes them to the test environment's TLS
# mirror under their registry.k8s.io names. Needs env/setup.sh (the mirror),
# install-kubernetes.sh (CoreDNS) and install-kubernetes-tests.sh;
# idempotent (images are reproducible: an unchanged image is not pushed
# again).
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# busybox as upstream releases it, for the busybox:1.37.0-2 image. Debian's
# busybox reverts upstream's ash change that keeps environment entries whose
# names are no shell identifiers (envFrom keys such as "data-1") for the
# commands it runs; the Secrets and ConfigMap "consumable via the
# environment" specs print them with `sh -c env`, as the official busybox
# image does. Built with busybox's defconfig from the upstream tarball of
# Debian's source package (apt checks it against the signed Sources index),
# without Debian's patches. Debian's stable release carries this upstream
# version; a newer one makes the build stop and name it.
UPSTREAM_BUSYBOX_VERSION="1.35.0"
UPSTREAM_BUSYBOX="$CRIDOCK_TOOLS_DIR/busybox/$UPSTREAM_BUSYBOX_VERSION-defconfig/bin/busybox"

# deb_src_parts DIR: this host's apt sources, as source-package entries, in DIR.
deb_src_parts() {
  local dir="$1" file
  for file in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$file" ]] && sed -E 's/^Types:.*/Types: deb-src/' "$file" >"$dir/$(basename "$file")"
  done
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f "$file" ]] && sed -n 's/^deb[[:space:]]/deb-src /p' "$file" >>"$dir/host.list"
  done
  return 0
}

ensure_upstream_busybox() {
  [[ -x "$UPSTREAM_BUSYBOX" ]] && return 0
  local tmp
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064  # the directory is known now
  trap "rm -rf '$tmp'" EXIT
  mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/source" "$tmp/build"
  deb_src_parts "$tmp/parts"
  # apt with its own source list and state, so the host's stay as they are.
  local apt=(apt-get -q -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$tmp/parts"
    -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache" -o APT::Sandbox::User=root)
  log "fetching Debian's busybox source package for the busybox test image"
  { "${apt[@]}" update && (cd "$tmp/source" && "${apt[@]}" source --download-only busybox); } \
    </dev/null >>"$ENV_LOG_DIR/apt.log" 2>&1 || die "apt-get source busybox failed; see $ENV_LOG_DIR/apt.log"
  local tarball="$tmp/source/busybox_$UPSTREAM_BUSYBOX_VERSION.orig.tar.bz2"
  [[ -f "$tarball" ]] ||
    die "Debian's busybox source is not upstream $UPSTREAM_BUSYBOX_VERSION (it has: $(ls "$tmp/source")); set UPSTREAM_BUSYBOX_VERSION to its version"
  log "building busybox $UPSTREAM_BUSYBOX_VERSION (defconfig)"
  tar -xjf "$tarball" -C "$tmp/build" --strip-components=1
  (cd "$tmp/build" && make defconfig && nice make -j"$(nproc)" busybox) >"$ENV_LOG_DIR/busybox-build.log" 2>&1 ||
    die "building busybox failed; see $ENV_LOG_DIR/busybox-build.log"
  mkdir -p "$(dirname "$UPSTREAM_BUSYBOX")"
  install -m 0755 "$tmp/build/busybox" "$UPSTREAM_BUSYBOX.new" && mv "$UPSTREAM_BUSYBOX.new" "$UPSTREAM_BUSYBOX"
}

# kubernetes_source_dir GO: k8s.io/kubernetes at $KUBERNETES_VERSION in the module cache.
kubernetes_source_dir() {
  "$1" mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'
}

main() {
  require_root
  mkdir -p "$ENV_LOG_DIR"
  tool_lock conformance-images
  install_missing_packages "${CONFORMANCE_IMAGE_PACKAGES[@]}"
  ensure_upstream_busybox
  local source
  source="$(kubernetes_source_dir "$(find_go "the conformance images")")"
  [[ -n "$source" && -d "$source" ]] || die "go mod download k8s.io/kubernetes@$KUBERNETES_VERSION gave no directory"
  (cd "$CRIDOCK_REPO_ROOT" &&
    CRIDOCK_KUBERNETES_TEST_BIN_DIR="$KUBERNETES_TEST_BIN_DIR" CRIDOCK_KUBERNETES_SOURCE_DIR="$source" \
      CRIDOCK_COREDNS_BIN_DIR="$COREDNS_BIN_DIR" CRIDOCK_UPSTREAM_BUSYBOX="$UPSTREAM_BUSYBOX" \
      node_modules/.bin/tsx scripts/env/images/build.ts --state-dir "$ENV_STATE_DIR" --set conformance) 2>>"$ENV_LOG_DIR/images.log" ||
    die "building the conformance images failed; see $ENV_LOG_DIR/images.log"
}

main "$@"
