#!/usr/bin/env bash
# Puts this machine back, as far as the test environment goes, to the state
# of a new one, so that a run of `bash .ci/run` in a fresh clone measures
# what CI meets on a machine it has never run on: no tools, no Go build or
# module cache, no npm cache, no images and no engine data, and none of the
# Debian packages the environment installed.
#
#   1. scripts/env-teardown.sh --purge: stops every daemon, cluster and
#      test engine the scripts started, and removes their state
#      (/var/lib/cridock-env, where the Engine 29 setups keep their data);
#   2. purges the Debian packages install_missing_packages recorded as
#      installed by it (dependencies included); packages the machine came
#      with are never touched, so nothing the machine's own toolchains need
#      goes; and removes the apt source scripts/vm/host.sh added for qemu;
#   3. removes the tools cache (/var/cache/cridock-tools), the Go build and
#      module caches (`go env GOCACHE GOMODCACHE`), npm's cache, the Debian
#      engine's data (/var/lib/docker, /var/lib/containerd) and the logs.
#
# Then, for the figure: git clone <this repo> /tmp/fresh && cd /tmp/fresh &&
# CI=true bash .ci/run </dev/null
#
# Usage: fresh-machine.sh --yes   (it deletes caches that take most of an hour to rebuild)
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# purge_packages PACKAGE...: those of them still installed.
purge_packages() {
  local installed=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null | grep -qx installed && installed+=("$pkg")
  done
  ((${#installed[@]} > 0)) || { log "no Debian package of the environment's is installed"; return 0; }
  log "purging ${#installed[@]} Debian packages the environment installed"
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "${installed[@]}" </dev/null >>"$ENV_LOG_DIR/apt.log" 2>&1 ||
    die "apt-get purge failed; see $ENV_LOG_DIR/apt.log"
}

# remove_backports_source: the suite scripts/vm/host.sh added, and apt's
# lists of it.
remove_backports_source() {
  [[ -f "$VM_BACKPORTS_LIST" ]] || return 0
  rm -f "$VM_BACKPORTS_LIST"
  DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null >>"$ENV_LOG_DIR/apt.log" 2>&1 ||
    log "apt-get update after removing $VM_BACKPORTS_LIST failed; see $ENV_LOG_DIR/apt.log"
  log "removed $VM_BACKPORTS_LIST"
}

remove_caches() {
  local go dir
  if go="$(find_go "clearing Go's caches" 2>/dev/null)"; then
    for dir in $("$go" env GOCACHE GOMODCACHE); do
      # The module cache is read-only by design.
      [[ -d "$dir" ]] && chmod -R u+w "$dir" && rm -rf "$dir" && log "removed $dir"
    done
  fi
  command -v npm >/dev/null && npm cache clean --force >/dev/null 2>&1 && log "cleared npm's cache"
  for dir in "$CRIDOCK_TOOLS_DIR" /var/lib/docker /var/lib/containerd; do
    [[ -e "$dir" ]] || continue
    # A mount a killed engine left would make rm fail half-way.
    unmount_beneath "$dir"
    if mountpoint -q "$dir"; then
      # A volume of the machine's own mounted there (some hosts give the
      # engine's data a disk of its own): emptied, the mount point kept.
      find "$dir" -mindepth 1 -maxdepth 1 -exec rm -rf {} + && log "emptied $dir (a mount point of the machine's)"
    else
      rm -rf "$dir" && log "removed $dir"
    fi
  done
}

main() {
  [[ "${1:-}" == --yes ]] || die "usage: fresh-machine.sh --yes (deletes the tools, Go, npm and image caches and purges the environment's packages)"
  require_root
  # The record lives in the state directory that --purge removes.
  local packages=()
  [[ -s "$ENV_INSTALLED_PACKAGES" ]] && mapfile -t packages < <(sort -u "$ENV_INSTALLED_PACKAGES")
  bash "$CRIDOCK_REPO_ROOT/scripts/env-teardown.sh" --purge </dev/null
  mkdir -p "$ENV_LOG_DIR"
  purge_packages "${packages[@]}"
  remove_backports_source
  remove_caches
  rm -rf "$ENV_LOG_DIR" "$ENV_RUN_DIR"
  log "this machine is as fresh as the test environment can make it: clone the repo anew and run .ci/run"
}

main "$@"
