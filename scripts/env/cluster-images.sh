#!/usr/bin/env bash
# Builds the images kubeadm deploys (scripts/env/images/kubernetes-images.ts) from
# the binaries scripts/env/install-kubernetes.sh built, and pushes them to the
# test environment's TLS mirror under the names kubeadm asks for, so that
# `kubeadm config images pull` works unchanged. Checks first that those names
# are exactly what `kubeadm config images list` prints. Needs env/setup.sh
# (the mirror) and install-kubernetes.sh; idempotent (images are reproducible:
# an unchanged binary is not pushed again).
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# The names this script and env-setup serve, as "registry.k8s.io/<name>:<tag>",
# one a line, sorted. The pause image is the test catalog's (cridock's
# default pause image, DEFAULT_PAUSE_IMAGE in test/helpers/env.ts), which
# env/setup.sh pushes.
catalog_names() {
  printf '%s\n' \
    "registry.k8s.io/kube-apiserver:$KUBERNETES_VERSION" \
    "registry.k8s.io/kube-controller-manager:$KUBERNETES_VERSION" \
    "registry.k8s.io/kube-scheduler:$KUBERNETES_VERSION" \
    "registry.k8s.io/kube-proxy:$KUBERNETES_VERSION" \
    "registry.k8s.io/coredns/coredns:$COREDNS_VERSION" \
    "registry.k8s.io/pause:$KUBEADM_PAUSE_VERSION" \
    "registry.k8s.io/etcd:$ETCD_VERSION" | sort
}

main() {
  require_root
  mkdir -p "$ENV_LOG_DIR"
  tool_lock cluster-images
  local wanted
  wanted="$("$KUBERNETES_BIN_DIR/kubeadm" config images list --kubernetes-version "$KUBERNETES_VERSION" 2>>"$ENV_LOG_DIR/images.log" | sort)" ||
    die "kubeadm config images list failed; see $ENV_LOG_DIR/images.log"
  [[ "$wanted" == "$(catalog_names)" ]] ||
    die "kubeadm $KUBERNETES_VERSION asks for images this script does not build: $(comm -23 <(echo "$wanted") <(catalog_names) | paste -sd ' ')"
  (cd "$CRIDOCK_REPO_ROOT" &&
    CRIDOCK_KUBERNETES_VERSION="$KUBERNETES_VERSION" CRIDOCK_ETCD_VERSION="$ETCD_VERSION" \
      CRIDOCK_COREDNS_VERSION="$COREDNS_VERSION" \
      CRIDOCK_KUBERNETES_BIN_DIR="$KUBERNETES_BIN_DIR" CRIDOCK_COREDNS_BIN_DIR="$COREDNS_BIN_DIR" \
      node_modules/.bin/tsx scripts/env/images/build.ts --state-dir "$ENV_STATE_DIR" --set kubernetes) 2>>"$ENV_LOG_DIR/images.log" ||
    die "building the Kubernetes images failed; see $ENV_LOG_DIR/images.log"
}

main "$@"
