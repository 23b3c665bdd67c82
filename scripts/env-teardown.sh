#!/usr/bin/env bash
# Undoes scripts/env/setup.sh, scripts/run-cridock.sh, a kubeadm cluster
# of scripts/cluster.sh and the VMs of scripts/vm/node.sh that a killed run
# left: stops the daemons
# they started (by pid file: a dockerd or registry that was already running
# is left alone) including the Engine 29 test setups and their bridges, takes
# back the mirror registry's host changes (its /etc/hosts line and its CA in
# /etc/docker/certs.d), removes the default CNI config run-cridock.sh installed if
# it is unchanged, and deletes the bridges cridock's tests and default
# network created. Installed packages, the tools cache (cri-tools, Engine
# 29), registry storage, the engines' data roots and the auth registry's
# password stay, so the next setup is fast.
#
# Usage: env-teardown.sh [--purge]   --purge also removes /var/lib/cridock-env.
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/env/common.sh"
# shellcheck source=scripts/env/mirror.sh
source "$(dirname "${BASH_SOURCE[0]}")/env/mirror.sh"
# shellcheck source=scripts/k8s/cluster-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s/cluster-common.sh"


# Removes the files run-cridock.sh installed, each only if it still holds
# what was installed, and the bridge of that network.
remove_default_cni_conf() {
  [[ -f "$DEFAULT_CNI_STAMP" ]] || return 0
  local installed
  while IFS= read -r installed; do
    [[ -n "$installed" ]] || continue
    if [[ -f "$installed" ]] && cmp -s "$installed" "$CRIDOCK_REPO_ROOT/scripts/cni/$(basename "$installed")"; then
      rm -f "$installed"
      log "removed $installed"
    fi
  done <"$DEFAULT_CNI_STAMP"
  rm -f "$DEFAULT_CNI_STAMP"
  delete_bridge "$DEFAULT_CNI_BRIDGE"
  # The directory too, if run-cridock.sh made it and nothing else was put there since.
  local created="$ENV_STATE_DIR/cni-conf-dir-created" dir
  if [[ -f "$created" ]]; then
    dir="$(cat "$created")"
    if rmdir "$dir" 2>/dev/null; then
      rmdir "$(dirname "$dir")" 2>/dev/null || true
    fi
    rm -f "$created"
  fi
}

remove_crictl_link() {
  local stamp="$ENV_STATE_DIR/crictl-link-installed" link
  [[ -f "$stamp" ]] || return 0
  link="$(cat "$stamp")"
  [[ -L "$link" ]] && rm -f "$link"
  rm -f "$stamp"
}

main() {
  require_root
  local purge=0
  [[ "${1:-}" == "--purge" ]] && purge=1
  # A kubeadm cluster a killed test run left (scripts/cluster.sh): its pods,
  # daemons, iptables chains, mounts and files, before the engines and the
  # mirror it pulled from go.
  if [[ -d "$CLUSTER_STATE_DIR" || -d "$CLUSTER_RUN_DIR" ]]; then
    bash "$CRIDOCK_REPO_ROOT/scripts/cluster.sh" down
  fi
  # kubelet's QoS cgroups (kubepods), which a killed cluster or node suite
  # run leaves even once its state directory is gone.
  remove_kubelet_cgroups
  # The cgroup v2 test node's VMs (scripts/vm/node.sh), each with its overlay;
  # the image stays in the tools cache.
  bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" stop --all
  remove_mirror_registry
  # The Engine 29 test setups (their pid files say whether we started them).
  bash "$CRIDOCK_REPO_ROOT/scripts/env/test-engines.sh" stop
  stop_daemon registry-auth
  stop_daemon registry
  # A dockerd we did not start has no pid file and is not touched.
  stop_daemon dockerd 60
  remove_default_cni_conf
  remove_crictl_link
  # The bridges the CNI bridge plugin made for the test suites' own networks
  # (shared integration, sandboxes, faults): each test file leaves its
  # bridge for the next one.
  local bridge
  for bridge in cridock-t0 cridock-sb0 cridock-f0; do delete_bridge "$bridge"; done
  # The scratch mounts and e2e bridges of test files that did not get to
  # their own cleanup.
  bash "$CRIDOCK_REPO_ROOT/scripts/env/killed-run.sh"
  if ((purge)); then
    rm -rf "$ENV_STATE_DIR"
    log "removed $ENV_STATE_DIR"
  fi
}

main "$@"
