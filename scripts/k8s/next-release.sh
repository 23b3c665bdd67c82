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
# Usage: scripts/k8s/next-release.sh [SUITE...]
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/env/versions.env
source "$repo_root/scripts/env/versions.env"
export CRIDOCK_KUBERNETES_VERSION="$KUBERNETES_NEXT_VERSION"
export GOTOOLCHAIN="$KUBERNETES_NEXT_GOTOOLCHAIN"
printf 'next-release: Kubernetes %s (Go %s)\n' "$CRIDOCK_KUBERNETES_VERSION" "$GOTOOLCHAIN" >&2
(($# > 0)) || set -- vm
exec bash "$repo_root/scripts/test.sh" "$@"
