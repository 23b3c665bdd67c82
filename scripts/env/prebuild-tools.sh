#!/usr/bin/env bash
# Builds the test tools the named suites will need, one after another, so
# that scripts/test.sh can run it in the background while the
# suites that need none of them run. On a fresh machine the builds take
# most of half an hour of CPU; run in the foreground before the first
# suite, nothing else would use that time.
#
# Each step is one of the install scripts the suites call themselves
# anyway, and each of those holds the tool's lock in the tools cache
# (tool_lock in scripts/env/common.sh) while it builds. A suite that
# needs a tool this script is still building waits for it, then finds it in
# place; a step that failed here is simply built again by the suite, which
# reports the failure as its own. So this script's outcome decides nothing:
# it logs each step's time and result, and always exits 0.
#
# Usage: prebuild-tools.sh STEP...   in the order given, each at most once:
#   packages            the Debian packages the conformance images take
#                       binaries from (installed first: later dpkg runs of the
#                       suites must not meet this script's apt lock)
#   cri-tools           crictl, critest, ginkgo (install-cri-tools.sh)
#   docker-engine       Docker Engine 29 and its runc (install-docker-engine.sh)
#   kubernetes          kubelet, kubeadm, the control plane, etcd, CoreDNS
#   kubernetes-previous the same of the previous release (the kubelet suite's lane)
#   kubernetes-tests    e2e.test, e2e_node.test and the test images' programs
#   conformance-images  the images those suites pull (needs the two above)
#   cluster-images      the images kubeadm deploys (needs kubernetes)
#   vm-image            the cgroup v2 nodes' disk images (vm/node.sh image),
#                       started where it stands in the list and run beside
#                       the steps after it
set -uo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

scripts_dir="$CRIDOCK_REPO_ROOT/scripts"
env_dir="$scripts_dir/env"

run_step() {
  case "$1" in
    packages) install_missing_packages "${CONFORMANCE_IMAGE_PACKAGES[@]}" ;;
    cri-tools) bash "$env_dir/install-cri-tools.sh" ;;
    docker-engine) bash "$env_dir/install-docker-engine.sh" >/dev/null ;;
    kubernetes) bash "$env_dir/install-kubernetes.sh" ;;
    kubernetes-previous) CRIDOCK_KUBERNETES_VERSION="$KUBERNETES_PREVIOUS_VERSION" bash "$env_dir/install-kubernetes.sh" ;;
    kubernetes-tests) bash "$env_dir/install-kubernetes-tests.sh" ;;
    conformance-images) bash "$env_dir/conformance-images.sh" ;;
    cluster-images) bash "$env_dir/cluster-images.sh" ;;
    # Each Debian release the VM chain's nodes run (plan.ts's VM_CHAIN).
    vm-image)
      local debian
      for debian in $(cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/suite/plan.ts vm-releases); do
        CRIDOCK_VM_DEBIAN="$debian" bash "$scripts_dir/vm/node.sh" image >/dev/null || return
      done
      ;;
    *) log "prebuild: unknown step '$1'"; return 2 ;;
  esac
}

# run_step_logged STEP: one step, its time and result in the log.
run_step_logged() {
  local step="$1" started=$SECONDS status=0
  log "prebuild: $step"
  run_step "$step" </dev/null || status=$?
  log "prebuild: $step $( ((status == 0)) && echo done || echo "failed with $status (the suite that needs it builds it again)") in $((SECONDS - started)) s"
}

main() {
  require_root
  mkdir -p "$ENV_LOG_DIR"
  local step all_started=$SECONDS beside=""
  for step in "$@"; do
    if [[ "$step" == vm-image ]]; then
      # Downloads and dpkg in a chroot, not the Go compiles that keep the
      # cores busy: it runs beside the other steps.
      run_step_logged "$step" &
      beside=$!
      continue
    fi
    run_step_logged "$step"
  done
  [[ -z "$beside" ]] || wait "$beside" || true
  log "prebuild: all steps ended in $((SECONDS - all_started)) s"
  return 0
}

main "$@"
