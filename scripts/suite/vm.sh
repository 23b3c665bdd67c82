# shellcheck shell=bash disable=SC2034  # SUITE_ENV are test.sh's, read by run_tap_files
# The cgroup v2 node's suites of scripts/test.sh (which sources this file):
# vm (one VM of scripts/vm/node.sh serves a node's files, and then, its
# engine switched in place, the files of the in-place steps after it), vm-lifecycle and
# vm-kubeadm (each file boots a VM of its own), as the steps of
# scripts/suite/plan.ts's VM_CHAIN (a suite on a node: a Debian release and
# a Docker engine, counted as SUITE@NODE), run one after another beside the
# host's suites from the start of the run (start, collect, stop on an early
# exit) or in their turn. Uses build_deb (scripts/suite/packaging.sh),
# run_tap_files (scripts/suite/tap.sh) and test.sh's globals RESULTS_DIR,
# SUMMARY_ARGS, SUITE_ENV and TIMES.

# run_vm_chain SUITE...: the chain's steps of these suites, in its order.
# In the background chain a step after the first starts only when
# vm_step_begins says it fits. A vm step's VM stays up for the in-place
# steps after it (their engine switched on it) and is powered off after
# the last of them. Each step's time goes into vm-chain.times in
# RESULTS_DIR.
run_vm_chain() {
  local listing line suite node debian vm_engine vm estimate lengthens cycle files started
  if ! listing="$(cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/suite/plan.ts vm-chain "$@")"; then
    SUMMARY_ARGS+=(--failed "$1=its nodes could not be listed (scripts/suite/plan.ts vm-chain $*)")
    return 0
  fi
  VM_LIVE=""
  while IFS= read -r line; do
    [[ -n "$line" ]] || continue
    read -r suite node debian vm_engine vm estimate lengthens cycle files <<<"$line"
    # The VM up is powered off once a step has no use for it.
    [[ -z "$VM_LIVE" || "$vm" == "$VM_LIVE" ]] || stop_live_vm
    vm_step_begins "$suite@$node" "$estimate" "$lengthens" || continue
    started=$SECONDS
    local node_env=(CRIDOCK_VM_DEBIAN="$debian" CRIDOCK_VM_ENGINE="$vm_engine")
    # The package's upgrade cycle left to a later step on this VM (plan.ts's packageCycleIn).
    [[ "$cycle" == - ]] || node_env+=(CRIDOCK_VM_PACKAGE_CYCLE_IN="$cycle")
    case "$suite" in
      vm)
        if [[ "$vm" == "$node" ]]; then
          run_vm_node "$node" "$files"
        else
          run_vm_in_place "$vm" "$node" "$vm_engine" "$files"
        fi
        ;;
      vm-lifecycle)
        bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubelet.sh" >/dev/null
        # checkpointctl reads CheckpointContainer's archives (checkpoint.test.ts).
        bash "$CRIDOCK_REPO_ROOT/scripts/env/install-cri-tools.sh" checkpointctl >/dev/null
        run_own_vm_files "$suite@$node" "$files" "reboots and checkpoints on the cgroup v2 node"
        ;;
      vm-kubeadm)
        bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubernetes.sh" >/dev/null
        bash "$CRIDOCK_REPO_ROOT/scripts/env/cluster-images.sh"
        run_own_vm_files "$suite@$node" "$files" "kubeadm on the cgroup v2 node"
        ;;
    esac
    echo "$suite@$node $((SECONDS - started)) s" >>"$RESULTS_DIR/vm-chain.times"
    # The chain's pace is the first step's (vm_step_begins).
    [[ -n "$VM_FIRST_STEP" ]] || VM_FIRST_STEP="$estimate $((SECONDS - started))"
  done <<<"$listing"
  stop_live_vm
}

# In the background chain, the steps after the first start only when they
# are expected to end within VM_BUDGET_S of the run's start
# (CRIDOCK_VM_BUDGET_S, default 75 minutes: CI's limit for a fresh machine
# is 80), each step's estimate (plan.ts's VM_CHAIN) scaled by how much
# longer than its own the first step took; and once the host's suites have
# ended, only a step the run may wait for: in place, or one whose files
# only the cgroup v2 node can test (plan.ts's vmStepDecision). A node
# takes 5 to 30 minutes of a fast machine's emulated CPU and 3 times that
# of a slow one's. A step not started is counted as skipped, with the
# reason, not as passed; the chain's order puts first what only a VM can
# test.
VM_BUDGET_S="${CRIDOCK_VM_BUDGET_S:-4500}"
# 1 in the background chain, where the budget holds; the first step's
# "ESTIMATE TOOK" once it ended; the VM left up for in-place steps.
VM_BUDGET_ACTIVE=0
VM_FIRST_STEP=""
VM_LIVE=""

# vm_step_begins NAME ESTIMATE LENGTHENS: whether the chain's step NAME
# (suite@node) starts; when not, it is counted as skipped with the reason.
vm_step_begins() {
  local name="$1" estimate="$2" lengthens="$3" decision host_ended=0
  ((VM_BUDGET_ACTIVE == 1)) && [[ -n "$VM_FIRST_STEP" ]] || return 0
  [[ ! -f "$RESULTS_DIR/host-suites.ended" ]] || host_ended=1
  # shellcheck disable=SC2086  # VM_FIRST_STEP is two numbers
  if ! decision="$(cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/suite/plan.ts vm-step "$estimate" "$lengthens" "$SECONDS" $VM_FIRST_STEP "$host_ended" "$VM_BUDGET_S")"; then
    decision="skip not started: its start could not be decided (scripts/suite/plan.ts vm-step)"
  fi
  if [[ "$decision" == start* ]]; then
    echo "# $name starts at $SECONDS s into the run, expected to end by ${decision#start } s"
    return 0
  fi
  SUMMARY_ARGS+=(--skipped "$name=${decision#skip }")
  echo "$name not started ($SECONDS s into the run)" >>"$RESULTS_DIR/vm-chain.times"
  return 1
}

# run_vm_node NODE FILES: test/vm's FILES (space-separated) on one node: the
# .deb installed in a Debian VM under qemu TCG and a kubelet there
# (docs/testing.md, "The cgroup v2 node"). One VM, named NODE, serves the
# files (CRIDOCK_VM_NODE): its boot, minutes of emulated CPU, overlaps the
# .deb's build here (none when the packaging suite built it). It stays up
# (VM_LIVE) for the chain's in-place steps; run_vm_chain powers it off. The
# boot's stderr is shown and also kept (vm-NODE-boot.err in RESULTS_DIR): a
# failed boot ends with one line saying why ("vm-node: NAME did not boot:
# REASON"), and that line goes into the failure's message. Uses node_env
# (run_vm_chain's).
run_vm_node() {
  local node="$1" files="$2" boot_status=0 kubelet_status=0 deb="" boot_err="$RESULTS_DIR/vm-$1-boot.err" why=""
  echo "# ---- vm@$node (the cgroup v2 node: ${node_env[*]})"
  env "${node_env[@]}" bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" image >/dev/null
  stderr_kept "$boot_err" env "${node_env[@]}" bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" start "$node" </dev/null &
  local boot_pid=$!
  build_deb && deb="$BUILT_DEB"
  # A kubelet that cannot be built is this step's failure, not the run's end
  # (set -e would leave the VM booting with nobody to stop it).
  bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubelet.sh" >/dev/null || kubelet_status=$?
  wait "$boot_pid" || boot_status=$?
  if ((kubelet_status != 0)); then
    SUMMARY_ARGS+=(--failed "vm@$node=kubelet $KUBERNETES_VERSION could not be built (install-kubelet.sh: exit $kubelet_status; log: $ENV_LOG_DIR/kubernetes-$KUBERNETES_VERSION-build.log)")
    bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" stop "$node" </dev/null || true
    return 0
  fi
  if [[ -z "$deb" || ! -f "$deb" ]] || ((boot_status != 0)); then
    ((boot_status == 0)) || why="$(last_line "$boot_err")"
    SUMMARY_ARGS+=(--failed "vm@$node=the .deb's build or the node's boot failed (boot: exit $boot_status${why:+, \"$why\"}; log: $ENV_LOG_DIR/vm-$node-console.log)")
    bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" stop "$node" </dev/null || true
    return 0
  fi
  VM_LIVE="$node"
  SUITE_ENV=("${node_env[@]}" CRIDOCK_VM_NODE="$node" CRIDOCK_VM_DEB="$deb")
  # Emulated CPU: a file takes minutes (the install, kubelet's first pod).
  # The pods file, beside all of the host's suites, took 2400 s (52543da:
  # three installs of the .deb at 585, 394 and 163 s, where alone they
  # take about 55 s each): it gets an hour, as a VM of its own does.
  run_tap_files "vm@$node" "$files" --jobs=1 --timeout=3600 --disable-coverage
  SUITE_ENV=()
}

# run_vm_in_place VM NODE ENGINE FILES: test/vm's FILES on the VM a step
# before booted (VM_LIVE), its dockerd switched to ENGINE in place
# (`vm/node.sh engine`: Docker replaced under a running cridock, as an
# operator's upgrade does), counted as vm@NODE. The .deb stays installed.
run_vm_in_place() {
  local vm="$1" node="$2" engine="$3" files="$4" switch_err="$RESULTS_DIR/vm-$2-switch.err"
  echo "# ---- vm@$node (the cgroup v2 node $vm, its engine switched to $engine in place)"
  if [[ "$VM_LIVE" != "$vm" ]]; then
    SUMMARY_ARGS+=(--skipped "vm@$node=not started: the VM of vm@$vm, whose engine it switches, is not up (see vm@$vm)")
    return 0
  fi
  # cridock must ride through Docker's replacement: the same process after it.
  local pid_before pid_after
  pid_before="$(cridock_main_pid "$vm")"
  if ! stderr_kept "$switch_err" bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" engine "$vm" "$engine" </dev/null; then
    SUMMARY_ARGS+=(--failed "vm@$node=switching $vm's engine to $engine failed: \"$(last_line "$switch_err")\"")
    return 0
  fi
  pid_after="$(cridock_main_pid "$vm")"
  if [[ ! "$pid_before" =~ ^[1-9][0-9]*$ || "$pid_after" != "$pid_before" ]]; then
    SUMMARY_ARGS+=(--failed "vm@$node=cridock.service did not ride through Docker's replacement by $engine (main pid $pid_before before, $pid_after after)")
  else
    echo "# cridock (pid $pid_after) rode through Docker's replacement by $engine"
  fi
  # The .deb the step that booted the VM built (build_deb keeps it) and installed.
  SUITE_ENV=("${node_env[@]}" CRIDOCK_VM_NODE="$vm" CRIDOCK_VM_DEB="$BUILT_DEB")
  run_tap_files "vm@$node" "$files" --jobs=1 --timeout=3600 --disable-coverage
  SUITE_ENV=()
}

# stderr_kept FILE COMMAND...: COMMAND with its stdout as it was and its
# stderr shown and also kept in FILE (for last_line); the status is
# COMMAND's (pipefail).
stderr_kept() {
  local file="$1"
  shift
  { "$@" 2>&1 >&3 3>&- | tee "$file" >&2; } 3>&1
}

# cridock_main_pid VM: cridock.service's main pid in the guest (0 when it runs none).
cridock_main_pid() {
  bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" ssh "$1" "systemctl show -p MainPID --value cridock.service" </dev/null 2>/dev/null || echo "?"
}

# stop_live_vm: powers off the VM kept up for in-place steps, if any.
stop_live_vm() {
  [[ -n "$VM_LIVE" ]] || return 0
  bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" stop "$VM_LIVE" </dev/null || true
  VM_LIVE=""
}

# run_own_vm_files NAME FILES WHAT: FILES (space-separated), each booting a
# VM of its own (CRIDOCK_VM_NODE unset) of the node node_env describes,
# given the .deb built here; counted as NAME.
#  - vm-lifecycle, a node's worst days: reboots, clean and by sysrq's reset,
#    with kubelet as an enabled unit, and CheckpointContainer through CRIU
#    (the reboot file reboots its VM; the checkpoint file switches dockerd to
#    experimental mode). About 6 minutes of a fast machine's emulated CPU, 20
#    of a slow one's (docs/testing.md, "The cgroup v2 node").
#  - vm-kubeadm: a VM of 3 GiB, the .deb installed and `kubeadm init`, which
#    pulls the control plane's images from the host's mirror registry
#    (cluster-images.sh pushes them). The control plane takes minutes of
#    emulated CPU to come up (docs/testing.md, "The cgroup v2 node").
run_own_vm_files() {
  local name="$1" files="$2" what="$3" deb=""
  echo "# ---- $name ($what: ${node_env[*]})"
  env "${node_env[@]}" bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" image >/dev/null
  build_deb && deb="$BUILT_DEB"
  if [[ -z "$deb" || ! -f "$deb" ]]; then
    SUMMARY_ARGS+=(--failed "$name=the .deb's build failed")
    return 0
  fi
  SUITE_ENV=("${node_env[@]}" CRIDOCK_VM_DEB="$deb")
  run_tap_files "$name" "$files" --jobs=1 --timeout=3600 --disable-coverage
  SUITE_ENV=()
}

# The VM suites beside all the host's suites: the chain's steps of those
# the run asks for, one after another in a background subshell from the
# start of the run, their output kept in a file and shown, with their
# results counted, when the loop reaches the first of them. The guest's CPU
# is emulated, and qemu runs niced (vm/node.sh), so it takes the cycles the
# host's suites leave while they wait on dockerd, kubelet and the cluster;
# alone, their half hour would come on top of theirs. Started at the first
# of e2e, cluster and node-conformance instead, the run waited a quarter of
# an hour for the vm suite at the end.
# The .deb is built before (here, so that the packaging suite installs the
# same file); what the nodes need from the tools cache is awaited in the
# subshell, niced, so that on a fresh machine the VM boots only once
# Kubernetes is built and never slows that build down.
VM_BESIDE_PID=""
VM_BESIDE_SUITES=()
start_vm_beside() {
  VM_BESIDE_SUITES=("$@")
  build_deb || true
  log "the ${VM_BESIDE_SUITES[*]} suites run beside the suites from here on (log: $RESULTS_DIR/vm-beside.log)"
  (
    local before=${#SUMMARY_ARGS[@]}
    VM_BUDGET_ACTIVE=1
    nice -n 19 bash "$CRIDOCK_REPO_ROOT/scripts/env/install-cri-tools.sh" >/dev/null
    [[ " ${VM_BESIDE_SUITES[*]} " != *" vm-lifecycle "* ]] ||
      nice -n 19 bash "$CRIDOCK_REPO_ROOT/scripts/env/install-cri-tools.sh" checkpointctl >/dev/null
    nice -n 19 bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubelet.sh" >/dev/null
    run_vm_chain "${VM_BESIDE_SUITES[@]}"
    # One element a line: what the suites added, for collect_vm_beside.
    printf '%s\n' "${SUMMARY_ARGS[@]:before}" >"$RESULTS_DIR/vm-beside.args"
  ) </dev/null >"$RESULTS_DIR/vm-beside.log" 2>&1 &
  VM_BESIDE_PID=$!
}

# collect_vm_beside: waits for the background VM suites, prints their
# output and adds their results and times.
collect_vm_beside() {
  local waited=$SECONDS status=0 args=() line
  # From here the run waits on the chain alone: vm_step_begins boots a VM
  # of its own only for what the host's suites do not cover.
  echo "$SECONDS" >"$RESULTS_DIR/host-suites.ended"
  wait "$VM_BESIDE_PID" || status=$?
  VM_BESIDE_PID=""
  waited=$((SECONDS - waited))
  cat "$RESULTS_DIR/vm-beside.log"
  if [[ -f "$RESULTS_DIR/vm-beside.args" ]]; then
    mapfile -t args <"$RESULTS_DIR/vm-beside.args"
    SUMMARY_ARGS+=("${args[@]}")
  else
    SUMMARY_ARGS+=(--failed "vm=the background VM suites exited with $status before reporting")
  fi
  # No file when the chain ended before its first step did: under set -e, reading it would end the run here.
  if [[ -f "$RESULTS_DIR/vm-chain.times" ]]; then
    while IFS= read -r line; do TIMES+=("$line, beside the suites before"); done <"$RESULTS_DIR/vm-chain.times"
  fi
  TIMES+=("the VM suites: $waited s waited for after the host's suites")
}

# stop_vm_beside: on an early exit, the background suites and their VMs go too.
stop_vm_beside() {
  [[ -n "$VM_BESIDE_PID" ]] || return 0
  ! running_job "$VM_BESIDE_PID" || kill_tree "$VM_BESIDE_PID"
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
