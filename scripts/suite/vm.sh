# shellcheck shell=bash disable=SC2034  # SUITE_ENV are test.sh's, read by run_tap_suite
# The cgroup v2 node's suites of scripts/test.sh (which sources this file):
# vm (one VM of scripts/vm/node.sh for every file), vm-lifecycle and
# vm-kubeadm (each file boots a VM of its own), and running them one after
# another beside the host's suites from the start of the run (start, collect,
# stop on an early exit). Uses build_deb (scripts/suite/packaging.sh),
# run_tap_suite (scripts/suite/tap.sh) and test.sh's globals RESULTS_DIR,
# SUMMARY_ARGS, SUITE_ENV and TIMES.

# The cgroup v2 node suite (test/vm): the .deb installed in a Debian 12 VM
# under qemu TCG and a kubelet there (docs/testing.md, "The cgroup v2 node").
# The engine is the guest's own (Debian's docker.io), so it runs once. One
# VM serves every file (CRIDOCK_VM_NODE): its boot, minutes of emulated CPU,
# overlaps the .deb's build here (none when the packaging suite built it),
# and it is powered off after the last file.
# The boot's stderr is shown and also kept (vm-NODE-boot.err in
# RESULTS_DIR): a failed boot ends with one line saying why ("vm-node: NAME
# did not boot: REASON"), and that line goes into the failure's message.
VM_SUITE_NODE=suite
run_vm() {
  local engine="$1" boot_status=0 deb="" boot_err="$RESULTS_DIR/vm-$VM_SUITE_NODE-boot.err" why=""
  echo "# ---- vm@$engine (the cgroup v2 node)"
  bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" image >/dev/null
  # stdout as it was, stderr through tee; the pipeline's status is node.sh's (pipefail).
  { bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" start "$VM_SUITE_NODE" 2>&1 >&3 3>&- | tee "$boot_err" >&2; } 3>&1 </dev/null &
  local boot_pid=$!
  build_deb && deb="$BUILT_DEB"
  bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubelet.sh" >/dev/null
  wait "$boot_pid" || boot_status=$?
  if [[ -z "$deb" || ! -f "$deb" ]] || ((boot_status != 0)); then
    ((boot_status == 0)) || why="$(last_line "$boot_err")"
    SUMMARY_ARGS+=(--failed "vm@$engine=the .deb's build or the node's boot failed (boot: exit $boot_status${why:+, \"$why\"}; log: $ENV_LOG_DIR/vm-$VM_SUITE_NODE-console.log)")
  else
    SUITE_ENV=(CRIDOCK_VM_NODE="$VM_SUITE_NODE" CRIDOCK_VM_DEB="$deb")
    # Emulated CPU: a file takes minutes (the install, kubelet's first pod).
    run_tap_suite vm "$engine" --jobs=1 --timeout=2400 --disable-coverage
    SUITE_ENV=()
  fi
  bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" stop "$VM_SUITE_NODE" </dev/null || true
}

# The VM suites beside all the host's suites: the vm suite, then
# vm-lifecycle, then vm-kubeadm (those of them the run asks for), one after
# another in a background subshell from the start of the run, their output
# kept in a file and shown, with their results counted, when the loop
# reaches the first of them. The guest's CPU is emulated, and qemu runs
# niced (vm/node.sh), so it takes the cycles the host's suites leave while
# they wait on dockerd, kubelet and the cluster; alone, their half hour would
# come on top of theirs. Started at the first of e2e, cluster and
# node-conformance instead, the run waited a quarter of an hour for the vm
# suite at the end (docs/testing.md, "Where CI's time goes").
# The .deb is built before (here, so that the packaging suite installs the
# same file); what the nodes need from the tools cache is awaited in the
# subshell, niced, so that on a fresh machine the VM boots only once
# Kubernetes is built and never slows that build down.
# vm-kubeadm starts only while the run is younger than VM_KUBEADM_DEADLINE_S
# (CRIDOCK_VM_KUBEADM_DEADLINE_S, default 40 minutes): it takes 5 minutes of
# a fast machine's emulated CPU and 20 of a slow one's, so on a machine slow
# enough to reach the deadline first, it would take the run past CI's
# limit. It is then counted as skipped, with the reason, not as passed.
VM_BESIDE_PID=""
VM_BESIDE_SUITES=()
VM_KUBEADM_DEADLINE_S="${CRIDOCK_VM_KUBEADM_DEADLINE_S:-2400}"
start_vm_beside() {
  local engine="$1"; shift
  VM_BESIDE_SUITES=("$@")
  build_deb || true
  log "the ${VM_BESIDE_SUITES[*]} suites run beside the suites from here on (log: $RESULTS_DIR/vm-beside.log)"
  (
    local before=${#SUMMARY_ARGS[@]} started=$SECONDS suite
    nice -n 19 bash "$CRIDOCK_REPO_ROOT/scripts/env/install-cri-tools.sh" >/dev/null
    [[ " ${VM_BESIDE_SUITES[*]} " != *" vm-lifecycle "* ]] ||
      nice -n 19 bash "$CRIDOCK_REPO_ROOT/scripts/env/install-cri-tools.sh" checkpointctl >/dev/null
    nice -n 19 bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubelet.sh" >/dev/null
    for suite in "${VM_BESIDE_SUITES[@]}"; do
      if [[ "$suite" == vm-kubeadm ]] && ((SECONDS > VM_KUBEADM_DEADLINE_S)); then
        SUMMARY_ARGS+=(--skipped "vm-kubeadm@$engine=not started: the run was $SECONDS s old, past CRIDOCK_VM_KUBEADM_DEADLINE_S ($VM_KUBEADM_DEADLINE_S s); this machine's emulated CPU is too slow for it to fit CI's time")
        echo "vm-kubeadm@$engine not started ($SECONDS s into the run)" >>"$RESULTS_DIR/vm-beside.times"
        continue
      fi
      run_vm_suite "$suite" "$engine"
      echo "$suite@$engine $((SECONDS - started)) s" >>"$RESULTS_DIR/vm-beside.times"
      started=$SECONDS
    done
    # One element a line: what the suites added, for collect_vm_beside.
    printf '%s\n' "${SUMMARY_ARGS[@]:before}" >"$RESULTS_DIR/vm-beside.args"
  ) </dev/null >"$RESULTS_DIR/vm-beside.log" 2>&1 &
  VM_BESIDE_PID=$!
}

# run_vm_suite SUITE ENGINE: one of the VM suites.
run_vm_suite() {
  case "$1" in
    vm) run_vm "$2" ;;
    vm-lifecycle) run_vm_lifecycle "$2" ;;
    vm-kubeadm) run_vm_kubeadm "$2" ;;
  esac
}

# collect_vm_beside ENGINE: waits for the background VM suites, prints their
# output and adds their results and times.
collect_vm_beside() {
  local engine="$1" waited=$SECONDS status=0 args=() line
  wait "$VM_BESIDE_PID" || status=$?
  VM_BESIDE_PID=""
  waited=$((SECONDS - waited))
  cat "$RESULTS_DIR/vm-beside.log"
  if [[ -f "$RESULTS_DIR/vm-beside.args" ]]; then
    mapfile -t args <"$RESULTS_DIR/vm-beside.args"
    SUMMARY_ARGS+=("${args[@]}")
  else
    SUMMARY_ARGS+=(--failed "vm@$engine=the background VM suites exited with $status before reporting")
  fi
  # No file when the chain ended before its first suite did: under set -e, reading it would end the run here.
  if [[ -f "$RESULTS_DIR/vm-beside.times" ]]; then
    while IFS= read -r line; do TIMES+=("$line, beside the suites before"); done <"$RESULTS_DIR/vm-beside.times"
  fi
  TIMES+=("the VM suites: $waited s waited for after the host's suites")
}

# stop_vm_beside: on an early exit, the background suites and their VMs go too.
stop_vm_beside() {
  [[ -n "$VM_BESIDE_PID" ]] || return 0
  kill_tree "$VM_BESIDE_PID"
  bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" stop --all </dev/null >/dev/null 2>&1 || true
}

# last_line FILE: FILE's last non-blank line (nothing when there is none or no FILE).
last_line() {
  awk 'NF { last = $0 } END { print last }' "$1" 2>/dev/null || true
}

kill_tree() {
  local child
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill -TERM "$1" 2>/dev/null || true
}

# run_own_vm_suite SUITE ENGINE WHAT: a suite of test/SUITE whose file
# boots a VM of its own (CRIDOCK_VM_NODE unset), given the .deb built here.
run_own_vm_suite() {
  local suite="$1" engine="$2" what="$3" deb=""
  echo "# ---- $suite@$engine ($what)"
  bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" image >/dev/null
  build_deb && deb="$BUILT_DEB"
  if [[ -z "$deb" || ! -f "$deb" ]]; then
    SUMMARY_ARGS+=(--failed "$suite@$engine=the .deb's build failed")
    return 0
  fi
  SUITE_ENV=(CRIDOCK_VM_DEB="$deb")
  run_tap_suite "$suite" "$engine" --jobs=1 --timeout=3600 --disable-coverage
  SUITE_ENV=()
}

# kubeadm on the cgroup v2 node (test/vm-kubeadm): the file boots a VM of
# its own (3 GiB), installs the .deb there and runs `kubeadm init`, which
# pulls the control plane's images from the host's mirror registry
# (cluster-images.sh pushes them). The control plane takes minutes of
# emulated CPU to come up: in the default run it is the VM chain's last
# suite, started only before VM_KUBEADM_DEADLINE_S (docs/testing.md,
# "kubeadm on the node").
run_vm_kubeadm() {
  bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubernetes.sh" >/dev/null
  bash "$CRIDOCK_REPO_ROOT/scripts/env/cluster-images.sh"
  run_own_vm_suite vm-kubeadm "$1" "kubeadm on the cgroup v2 node"
}

# A node's worst days on the cgroup v2 node (test/vm-lifecycle): reboots,
# clean and by sysrq's reset, with kubelet as an enabled unit, and
# CheckpointContainer through CRIU. Each file boots a VM of its own (the
# reboot file reboots it; the checkpoint file switches dockerd to
# experimental mode). About 6 minutes of a fast machine's emulated CPU,
# 20 of a slow one's (docs/testing.md, "Reboots of the node").
run_vm_lifecycle() {
  bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubelet.sh" >/dev/null
  # checkpointctl reads CheckpointContainer's archives (checkpoint.test.ts).
  bash "$CRIDOCK_REPO_ROOT/scripts/env/install-cri-tools.sh" checkpointctl >/dev/null
  run_own_vm_suite vm-lifecycle "$1" "reboots and checkpoints on the cgroup v2 node"
}
