# The e2e suite's command line against the kubeadm cluster (sourced by
# scripts/k8s-conformance.sh after env/common.sh and cluster-common.sh).

# shellcheck shell=bash

# e2e_binary_flags DIR: sets E2E_BINARY_FLAGS to e2e.test's own flags for a
# run whose reports go to DIR.
#
# --kubectl-path: many specs shell out to kubectl (every sig-cli spec, and
# the Services, DNS and networking specs through `kubectl exec`), and
# e2e.test's default is whatever `kubectl` the PATH finds: none on a
# machine without one, elsewhere perhaps a client of another version (here
# a v1.32 one), outside the one-minor skew kubectl supports. The suite takes the kubectl built with the
# cluster it tests.
e2e_binary_flags() {
  local dir="$1"
  E2E_BINARY_FLAGS=(
    --provider=local
    --kubeconfig="$CLUSTER_KUBECONFIG"
    --kubectl-path="$KUBERNETES_BIN_DIR/kubectl"
    --report-dir="$dir"
    --non-blocking-taints=node-role.kubernetes.io/control-plane
  )
}
