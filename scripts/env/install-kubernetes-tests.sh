#!/usr/bin/env bash
# Builds Kubernetes' own conformance suites, once per version, into
# ${CRIDOCK_TOOLS_DIR:-/var/cache/cridock-tools}/kubernetes/$KUBERNETES_VERSION/test-bin:
#
#   e2e.test       `go test -c k8s.io/kubernetes/test/e2e` ([Conformance] against a cluster)
#   e2e_node.test  `go test -c k8s.io/kubernetes/test/e2e_node` ([NodeConformance]; runs its
#                  own kubelet against a runtime endpoint)
#   ginkgo         the ginkgo v2 CLI at the version k8s.io/kubernetes' go.mod pins, which
#                  runs a suite in parallel processes
#   agnhost, nonewprivs, sample-apiserver
#                  the Go programs of the suites' test images (test/images/agnhost,
#                  test/images/nonewprivs, k8s.io/sample-apiserver), which
#                  scripts/env/conformance-images.sh puts in those images
#
# They build in the scratch module install-kubernetes.sh uses for the control
# plane (scripts/env/kubernetes-module.sh), with the same version ldflags, so
# that the suites and the binaries they test agree on every shared package.
# `go get -t` adds what the two test packages import to that module's graph.
# Linking e2e.test takes several GB of memory, so this is opt-in
# (`install-kubernetes.sh --with-tests`, or this script alone, or
# scripts/k8s-conformance.sh, which CI's node-conformance suite runs); once
# built for a version, nothing is built again.
#
# Usage: install-kubernetes-tests.sh     build what is missing (quiet when nothing is)
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=scripts/env/kubernetes-module.sh
source "$(dirname "${BASH_SOURCE[0]}")/kubernetes-module.sh"

TEST_BINARIES=(e2e.test e2e_node.test ginkgo agnhost nonewprivs sample-apiserver)
TEST_PACKAGES=("$MODULE/test/e2e" "$MODULE/test/e2e_node")
# Main packages whose binary is named after the last element of their path.
IMAGE_PACKAGES=("$MODULE/test/images/agnhost" "$MODULE/test/images/nonewprivs" "k8s.io/sample-apiserver")
GINKGO_MODULE="github.com/onsi/ginkgo/v2"
BUILD_LOG="$ENV_LOG_DIR/kubernetes-tests-build.log"

tests_complete() {
  local name
  [[ -f "$KUBERNETES_TEST_BIN_DIR/.complete" && "$(cat "$KUBERNETES_TEST_BIN_DIR/.complete")" == "$KUBERNETES_VERSION" ]] || return 1
  for name in "${TEST_BINARIES[@]}"; do
    [[ -x "$KUBERNETES_TEST_BIN_DIR/$name" ]] || return 1
  done
}

build_tests() {
  local go="$1" scratch ginkgo started pkg
  scratch="$(mktemp -d /tmp/cridock-kubernetes-tests.XXXXXX)"
  # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
  trap "rm -rf '$scratch'" EXIT
  log "building Kubernetes $KUBERNETES_VERSION's e2e.test, e2e_node.test, ginkgo and the test images' programs: tens of minutes cold on 2 cores, several GB to link; log: $BUILD_LOG"
  started="$SECONDS"
  write_kubernetes_module "$go" "$scratch"
  ginkgo="$(kubernetes_required_version "$go" "$GINKGO_MODULE")"
  mkdir -p "$scratch/out"
  (
    cd "$scratch"
    "$go" mod tidy
    # Tests of a dependency are outside what tidy keeps; -t adds their imports.
    "$go" get -t "${TEST_PACKAGES[@]/%/@$KUBERNETES_VERSION}"
    "$go" get "$GINKGO_MODULE/ginkgo@$ginkgo" "${IMAGE_PACKAGES[0]}@$KUBERNETES_VERSION" "${IMAGE_PACKAGES[1]}@$KUBERNETES_VERSION" \
      "${IMAGE_PACKAGES[2]}@$(staging_version)"
    "$go" list -m -f '{{.Version}}' "$GINKGO_MODULE" | grep -qx "$ginkgo" ||
      { echo "the module graph holds ginkgo $("$go" list -m -f '{{.Version}}' "$GINKGO_MODULE"), not $ginkgo"; exit 1; }
    CGO_ENABLED=0 nice -n 10 "$go" test -c -trimpath -tags providerless -ldflags "$(version_ldflags)" \
      -o "$scratch/out/" "${TEST_PACKAGES[@]}"
    CGO_ENABLED=0 nice -n 10 "$go" build -trimpath -ldflags "-s -w" -o "$scratch/out/ginkgo" "$GINKGO_MODULE/ginkgo"
    CGO_ENABLED=0 nice -n 10 "$go" build -trimpath -tags providerless -ldflags "$(version_ldflags)" \
      -o "$scratch/out/" "${IMAGE_PACKAGES[@]}"
  ) </dev/null >>"$BUILD_LOG" 2>&1 || die "building the Kubernetes test binaries failed; see $BUILD_LOG"
  grep -q "${ginkgo#v}" <<<"$("$scratch/out/ginkgo" version)" ||
    die "the built ginkgo reports '$("$scratch/out/ginkgo" version)', not $ginkgo"
  for pkg in e2e.test e2e_node.test; do
    "$scratch/out/$pkg" --help >/dev/null 2>&1 || die "the built $pkg does not run: see '$scratch/out/$pkg --help'"
  done
  rm -rf "$KUBERNETES_TEST_BIN_DIR.new"
  mkdir -p "$KUBERNETES_TEST_BIN_DIR.new"
  for pkg in "${TEST_BINARIES[@]}"; do
    install -m 0755 "$scratch/out/$pkg" "$KUBERNETES_TEST_BIN_DIR.new/$pkg"
  done
  echo "$KUBERNETES_VERSION" >"$KUBERNETES_TEST_BIN_DIR.new/.complete"
  rm -rf "$KUBERNETES_TEST_BIN_DIR"
  mv "$KUBERNETES_TEST_BIN_DIR.new" "$KUBERNETES_TEST_BIN_DIR"
  rm -rf "$scratch"
  trap - EXIT
  log "installed ${TEST_BINARIES[*]} (ginkgo $ginkgo) in $KUBERNETES_TEST_BIN_DIR ($((SECONDS - started)) s)"
}

main() {
  (($# == 0)) || die "usage: install-kubernetes-tests.sh"
  mkdir -p "$ENV_LOG_DIR"
  tool_lock kubernetes-tests
  tests_complete && return 0
  build_tests "$(find_go "Kubernetes $KUBERNETES_VERSION's test binaries")"
}

main "$@"
