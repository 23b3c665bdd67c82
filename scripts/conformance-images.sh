#!/usr/bin/env bash
# Builds the images Kubernetes' e2e suites pull (scripts/images/conformance-images.ts)
# from the programs scripts/install-kubernetes-tests.sh built and from Debian
# binaries, and pushes them to the test environment's TLS mirror under their
# registry.k8s.io names. Needs env-setup.sh (the mirror), install-kubernetes.sh
# (CoreDNS) and install-kubernetes-tests.sh; idempotent (images are
# reproducible: an unchanged image is not pushed again).
set -euo pipefail

# shellcheck source=scripts/lib/env-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/env-common.sh"

# The tools agnhost and glibc-dns-testing carry (dig, nslookup, nc, iperf),
# taken from the host as the kube-proxy image takes iptables.
CONFORMANCE_IMAGE_PACKAGES=(bind9-dnsutils netcat-openbsd iperf iproute2 curl procps util-linux)

# kubernetes_source_dir GO: k8s.io/kubernetes at $KUBERNETES_VERSION in the module cache.
kubernetes_source_dir() {
  "$1" mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'
}

main() {
  require_root
  mkdir -p "$ENV_LOG_DIR"
  install_missing_packages "${CONFORMANCE_IMAGE_PACKAGES[@]}"
  local source
  source="$(kubernetes_source_dir "$(find_go "the conformance images")")"
  [[ -n "$source" && -d "$source" ]] || die "go mod download k8s.io/kubernetes@$KUBERNETES_VERSION gave no directory"
  (cd "$CRIDOCK_REPO_ROOT" &&
    CRIDOCK_KUBERNETES_TEST_BIN_DIR="$KUBERNETES_TEST_BIN_DIR" CRIDOCK_KUBERNETES_SOURCE_DIR="$source" \
      CRIDOCK_COREDNS_BIN_DIR="$COREDNS_BIN_DIR" \
      node_modules/.bin/tsx scripts/images/build.ts --state-dir "$ENV_STATE_DIR" --set conformance) 2>>"$ENV_LOG_DIR/images.log" ||
    die "building the conformance images failed; see $ENV_LOG_DIR/images.log"
}

main "$@"
