#!/usr/bin/env bash
# Clears what a test run killed in the middle left in the host, so that the
# next run starts from a clean node: scripts/test.sh runs it before its
# setup, and env-teardown.sh at its end.
#
# A test file works in a scratch directory of its own under $TMPDIR
# (cridock-e2e-*, cridock-dockerd-*, ...), and mounts things there: pinned
# network namespaces (cridock's and its private dockerd's), a dockerd's data
# root. A file that runs to its end unmounts them; one whose run was killed
# leaves them, and every pinned namespace keeps its pod's veth on the test
# bridge. The next run's e2e files reuse that bridge (cridock-e2e0), and
# their "nothing is left" checks find a stranger's veth. That happened once
# on a machine whose earlier run was killed in its e2e suite.
#
# A scratch directory counts as a killed run's only when no process names it
# in its command line or works in it: a run still going on keeps its own.
# What is cleared: its mounts (lazily, the deepest first; the namespaces they
# pinned then go, and their veths with them), then the directory itself, and
# the e2e bridges once no interface is attached to them.
#
# Usage: killed-run.sh   (CRIDOCK_KILLED_RUN_BRIDGES: the bridges to check
#                          instead of the e2e harness's, space-separated)
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SCRATCH_PARENT="${TMPDIR:-/tmp}"
SCRATCH_PARENT="${SCRATCH_PARENT%/}"
# The bridges the e2e harness (test/e2e/harness/kubelet-env.ts) makes: its
# CNI network's and its private dockerd's (its own test names others).
read -ra E2E_BRIDGES <<<"${CRIDOCK_KILLED_RUN_BRIDGES:-cridock-e2e0 cridock-e2ed}"

# scratch_dirs_with_mounts: the scratch directories ($SCRATCH_PARENT/cridock-*)
# that have something mounted under them.
scratch_dirs_with_mounts() {
  awk -v parent="$SCRATCH_PARENT/" '
    index($5, parent "cridock-") == 1 {
      rest = substr($5, length(parent) + 1)
      sub(/\/.*/, "", rest)
      print parent rest
    }' /proc/self/mountinfo | sort -u
}

# in_use DIR: whether a live process names DIR in its command line or has
# its working directory under it.
in_use() {
  local dir="$1" proc cwd
  for proc in /proc/[0-9]*; do
    [[ "$proc" != "/proc/$$" ]] || continue
    if tr '\0' ' ' 2>/dev/null <"$proc/cmdline" | grep -qF -- "$dir"; then return 0; fi
    cwd="$(readlink "$proc/cwd" 2>/dev/null)" || continue
    [[ "$cwd" != "$dir" && "$cwd" != "$dir/"* ]] || return 0
  done
  return 1
}

# clear_scratch DIR: unmounts everything under DIR, deepest first, then
# removes DIR (never crossing into another filesystem).
clear_scratch() {
  local dir="$1" count left
  count="$(mounts_beneath "$dir" | wc -l)"
  unmount_beneath "$dir"
  left="$(mounts_beneath "$dir" | wc -l)"
  if ((left > 0)); then
    log "$dir still has $left mount(s); leaving it"
    return 0
  fi
  rm -rf --one-file-system "$dir"
  log "cleared $dir ($count mount(s) a killed run left)"
}

# clear_e2e_bridges: deletes the e2e bridges once the veths of the
# namespaces just released are gone (the kernel destroys a namespace a
# moment after its last reference); a bridge that keeps an interface is left.
clear_e2e_bridges() {
  local bridge deadline=$((SECONDS + 15))
  for bridge in "${E2E_BRIDGES[@]}"; do
    ip link show "$bridge" >/dev/null 2>&1 || continue
    while [[ -n "$(bridge_ports "$bridge")" ]] && ((SECONDS < deadline)); do sleep 0.5; done
    delete_bridge "$bridge"
  done
}

main() {
  require_root
  local dir
  while IFS= read -r dir; do
    [[ -n "$dir" ]] || continue
    if in_use "$dir"; then continue; fi
    clear_scratch "$dir"
  done < <(scratch_dirs_with_mounts)
  clear_e2e_bridges
}

main "$@"
