#!/usr/bin/env bash
# The next Kubernetes release's lane, run on demand (CI does not): the
# suites named (default: vm, the cgroup v2 node's chain, where kubelet of
# that release drives cridock's .deb and critest runs in the guest) with
# Kubernetes at KUBERNETES_NEXT_VERSION of scripts/env/versions.env, built
# with the Go toolchain that release's module asks for
# (KUBERNETES_NEXT_GOTOOLCHAIN, which the module proxy serves). Everything
# else is as in scripts/test.sh. When the release is out, moving the whole
# environment to it is a change of versions.env and one green run.
#
# That release's binaries are the lane's point, so when a suite named needs
# them they are built (or found in the tools cache) before anything else:
# a release whose module graph cannot be had here (v1.38.0-beta.0 needs a
# module the proxy does not serve) ends the lane at once with the reason,
# before the setup and the VMs' boots, closing with test.sh's summary line.
#
# Usage: scripts/k8s/next-release.sh [SUITE...]
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/env/versions.env
source "$repo_root/scripts/env/versions.env"
export CRIDOCK_KUBERNETES_VERSION="$KUBERNETES_NEXT_VERSION"
# The kubelet suite (e2e) runs the previous release unless told otherwise
# (scripts/suite/kubernetes.sh): in this lane it runs the next one too.
export CRIDOCK_E2E_KUBERNETES_VERSION="$KUBERNETES_NEXT_VERSION"
export GOTOOLCHAIN="$KUBERNETES_NEXT_GOTOOLCHAIN"
printf 'next-release: Kubernetes %s (Go %s)\n' "$CRIDOCK_KUBERNETES_VERSION" "$GOTOOLCHAIN" >&2
(($# > 0)) || set -- vm

# The suites that run that release's kubelet (or its control plane).
needs_kubernetes=0
for suite in "$@"; do
  case "$suite" in
    vm | vm-lifecycle | vm-kubeadm | e2e | cluster | node-conformance) needs_kubernetes=1 ;;
  esac
done
if ((needs_kubernetes)); then
  # shellcheck source=scripts/env/common.sh
  source "$repo_root/scripts/env/common.sh"
  require_root
  if ! bash "$repo_root/scripts/env/install-kubernetes.sh"; then
    build_log="$ENV_LOG_DIR/kubernetes-$KUBERNETES_VERSION-build.log"
    printf 'next-release: Kubernetes %s could not be built; the lane stops before its suites (%s). The build log ends:\n' \
      "$KUBERNETES_VERSION" "$*" >&2
    grep -v '^go: downloading ' "$build_log" 2>/dev/null | tail -n 12 >&2 || true
    echo "0 passed, 1 failed"
    exit 1
  fi
fi
exec bash "$repo_root/scripts/test.sh" "$@"
