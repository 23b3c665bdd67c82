#!/usr/bin/env bash
# Builds the cAdvisor stats server of the node performance specs' "cadvisor"
# pod (scripts/env/cadvisor/main.go: cAdvisor's library manager behind its
# stats API) from the cAdvisor library version that k8s.io/kubernetes
# $KUBERNETES_VERSION requires, the one kubelet links, into
# ${CRIDOCK_TOOLS_DIR:-/var/cache/cridock-tools}/cadvisor/<version>-<source hash>/bin,
# and prints that directory. Static (CGO_ENABLED=0): the image carries no libc.
# For benchmarks only (scripts/bench/node-perf.sh); once built, nothing is
# built again.
#
# Usage: install-cadvisor.sh
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=scripts/env/kubernetes-module.sh
source "$(dirname "${BASH_SOURCE[0]}")/kubernetes-module.sh"

SOURCE="$CRIDOCK_REPO_ROOT/scripts/env/cadvisor/main.go"
CADVISOR_MODULE="github.com/google/cadvisor"
BUILD_LOG="$ENV_LOG_DIR/cadvisor-build.log"

build() {
  local go="$1" version="$2" dir="$3" scratch
  scratch="$(mktemp -d /tmp/cridock-cadvisor.XXXXXX)"
  # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
  trap "rm -rf '$scratch'" EXIT
  log "building the cAdvisor stats server from $CADVISOR_MODULE $version (log: $BUILD_LOG)"
  cp "$SOURCE" "$scratch/main.go"
  (
    cd "$scratch"
    "$go" mod init cridock.local/cadvisor
    "$go" get "$CADVISOR_MODULE@$version" "k8s.io/klog/v2@$(kubernetes_required_version "$go" k8s.io/klog/v2)"
    "$go" mod tidy
    "$go" list -m -f '{{.Version}}' "$CADVISOR_MODULE" | grep -qx "$version" ||
      { echo "the module graph holds cAdvisor $("$go" list -m -f '{{.Version}}' "$CADVISOR_MODULE"), not $version"; exit 1; }
    CGO_ENABLED=0 nice -n 10 "$go" build -trimpath -ldflags "-s -w -X $CADVISOR_MODULE/version.Version=$version" -o "$scratch/cadvisor" .
  ) </dev/null >>"$BUILD_LOG" 2>&1 || die "building the cAdvisor stats server failed; see $BUILD_LOG"
  mkdir -p "$dir"
  install -m 0755 "$scratch/cadvisor" "$dir/cadvisor.new"
  mv "$dir/cadvisor.new" "$dir/cadvisor"
  rm -rf "$scratch"
  trap - EXIT
}

main() {
  (($# == 0)) || die "usage: install-cadvisor.sh"
  mkdir -p "$ENV_LOG_DIR"
  local go version dir
  go="$(find_go "the cAdvisor stats server")"
  version="$(kubernetes_required_version "$go" "$CADVISOR_MODULE")"
  dir="$CRIDOCK_TOOLS_DIR/cadvisor/$version-$(sha256sum "$SOURCE" | cut -c1-12)/bin"
  tool_lock cadvisor
  [[ -x "$dir/cadvisor" ]] || build "$go" "$version" "$dir"
  echo "$dir"
}

main "$@"
