#!/usr/bin/env bash
# Runs cridock's whole test suite on this machine (Debian, as root): sets the
# environment up, then runs in order the unit tests, the integration tests
# (one file at a time: they share dockerd), the packaging tests (the
# self-contained executable, the .deb and the tarball are built first; the
# executable runs with no node reachable, the .deb passes lintian and is
# installed, used with crictl and purged), the fault suite (kill -9 loops,
# log integrity across restarts, races, a gRPC fuzzer; bounded to a few
# minutes), the Deno tests (the smoke tests, then the critest focus against
# cridock under Deno), the critest conformance runs, the kubelet end-to-end
# tests (with kubelet's evented PLEG; also with its generic PLEG when
# CRIDOCK_E2E_GENERIC_PLEG=1), the kubeadm cluster suite (scripts/cluster.sh
# up, kubectl against it, down) and a fixed list of Kubernetes'
# [NodeConformance] specs (e2e_node.test through scripts/k8s-conformance.sh
# node), and last the cgroup v2 node's suites (the Debian 12 VM of
# scripts/vm/node.sh with the .deb installed: vm, a kubelet with the systemd
# driver; vm-lifecycle, reboots and checkpoints; vm-kubeadm, kubeadm init
# there), which run beside all the others from the start. The suites that
# need Kubernetes' binaries come last: on a fresh machine those builds (in
# the background from the start) take longest.
# Ends with one line "N passed, N failed" (tap test points plus critest and
# e2e_node specs, of every engine) and exits non-zero if anything failed.
#
# The suites run against three engine setups (tests pick the engine from
# CRIDOCK_TEST_DOCKER_ENDPOINT):
#   docker29            Docker Engine 29, classic image store: the primary, every suite;
#   docker29-containerd Engine 29 with the containerd image store: the integration
#                       tests of images, stats and mounts, and critest;
#   docker20.10         Debian's 20.10 on /var/run/docker.sock, the oldest supported:
#                       the integration tests and critest.
# CRIDOCK_TEST_ENGINES (space-separated names) limits the run to some of them.
# CRIDOCK_CRITEST_PROCS (default 3) is the number of critest processes.
#
# Usage: scripts/test.sh [unit|integration|packaging|faults|deno|conformance|e2e|cluster|node-conformance|vm|vm-lifecycle|vm-kubeadm]...
#        (default: all, in that order; the VM suites beside the others when
#        others are named too, in the foreground when they alone are)
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/env/common.sh"

RESULTS_DIR=""
SUMMARY_ARGS=()
ALL_ENGINES=(docker29 docker29-containerd docker20.10)
PRIMARY_ENGINE=docker29
# The integration tests the containerd image store adds something to: images, stats, mounts,
# image volumes, and what reads image files (the Strict policy's /etc/passwd).
CONTAINERD_STORE_TESTS=(test/integration/images test/integration/stats test/integration/containers/engine-features.test.ts
  test/integration/containers/image-volumes.test.ts test/integration/containers/groups-devices.test.ts)
# Integration tests whose subject is not the engine (the npm package's
# install and systemd socket activation): they run with the primary only.
ENGINE_INDEPENDENT_TESTS=(test/integration/service/install.test.ts test/integration/service/socket-activation.test.ts)
ENGINES=()
# The engine the once-only suites run on (the primary, or the first chosen).
PRIMARY=""
# critest's processes (its -parallel, through the ginkgo CLI that
# install-cri-tools.sh builds beside it): its specs mostly wait on
# containers, so three keep two cores busy.
CRITEST_PROCS="${CRIDOCK_CRITEST_PROCS:-3}"
# "suite@engine N s", one per suite run, printed before the summary.
TIMES=()
# Set around a run_tap_suite call: the test directory when it differs from
# the suite's name, and extra environment for tap.
SUITE_DIR=""
SUITE_ENV=()

engine_endpoint() {
  case "$1" in
    docker20.10) echo "unix://$DOCKER_SOCKET" ;;
    *) test_engine_endpoint "$1" ;;
  esac
}

# Which suites run on which engine setup.
engine_runs() {
  local engine="$1" suite="$2"
  case "$engine:$suite" in
    "$PRIMARY_ENGINE":*) return 0 ;;
    *:integration | *:conformance) return 0 ;;
    *) return 1 ;;
  esac
}

# suite_files SUITE ENGINE: the test files of a suite on an engine (sorted, so runs are repeatable).
suite_files() {
  local dirs=("test/$1") skip=()
  [[ "$1" == integration && "$2" == docker29-containerd ]] && dirs=("${CONTAINERD_STORE_TESTS[@]}")
  [[ "$1" == integration && "$2" != "$PRIMARY" ]] && skip=("${ENGINE_INDEPENDENT_TESTS[@]}")
  (cd "$CRIDOCK_REPO_ROOT" && find "${dirs[@]}" -type f -name '*.test.ts' 2>/dev/null | sort |
    grep -vxF -f <(printf '%s\n' "${skip[@]}" ""))
}

# run_tap_suite SUITE ENGINE [TAP FLAGS...]: tap on the suite's files against ENGINE, TAP kept for counting.
run_tap_suite() {
  local suite="$1" engine="$2"; shift 2
  local name="$suite@$engine" files=() status
  mapfile -t files < <(suite_files "${SUITE_DIR:-$suite}" "$engine")
  if ((${#files[@]} == 0)); then
    echo "# $name: no test files yet"
    return 0
  fi
  echo "# ---- $name tests (${#files[@]} files)"
  set +e
  (cd "$CRIDOCK_REPO_ROOT" && env "${SUITE_ENV[@]}" CRIDOCK_TEST_DOCKER_ENDPOINT="$(engine_endpoint "$engine")" \
    node_modules/.bin/tap --reporter=tap --no-color "$@" "${files[@]}") </dev/null | tee "$RESULTS_DIR/$name.tap"
  status="${PIPESTATUS[0]}"
  set -e
  SUMMARY_ARGS+=(--tap "$name=$RESULTS_DIR/$name.tap")
  # tap may fail without a failing test point (a coverage or runner error): count that too.
  if ((status != 0)); then
    SUMMARY_ARGS+=(--exit-status "$name=$status")
  fi
}

# The cgroup v2 node suite (test/vm): the .deb installed in a Debian 12 VM
# under qemu TCG and a kubelet there (docs/testing.md, "The cgroup v2 node").
# The engine is the guest's own (Debian's docker.io), so it runs once. One
# VM serves every file (CRIDOCK_VM_NODE): its boot, minutes of emulated CPU,
# overlaps the .deb's build here (none when the packaging suite built it),
# and it is powered off after the last file.
VM_SUITE_NODE=suite
run_vm() {
  local engine="$1" boot_status=0 deb=""
  echo "# ---- vm@$engine (the cgroup v2 node)"
  bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" image >/dev/null
  bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" start "$VM_SUITE_NODE" </dev/null &
  local boot_pid=$!
  build_deb && deb="$BUILT_DEB"
  bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubelet.sh" >/dev/null
  wait "$boot_pid" || boot_status=$?
  if [[ -z "$deb" || ! -f "$deb" ]] || ((boot_status != 0)); then
    SUMMARY_ARGS+=(--failed "vm@$engine=the .deb's build or the node's boot failed (boot: exit $boot_status; log: $ENV_LOG_DIR/vm-$VM_SUITE_NODE-console.log)")
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
  while IFS= read -r line; do TIMES+=("$line, beside the suites before"); done <"$RESULTS_DIR/vm-beside.times"
  TIMES+=("the VM suites: $waited s waited for after the host's suites")
}

# stop_vm_beside: on an early exit, the background suites and their VMs go too.
stop_vm_beside() {
  [[ -n "$VM_BESIDE_PID" ]] || return 0
  kill_tree "$VM_BESIDE_PID"
  bash "$CRIDOCK_REPO_ROOT/scripts/vm/node.sh" stop --all </dev/null >/dev/null 2>&1 || true
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

# The kubelet suite (test/e2e), with the evented PLEG (and the generic one on
# request). kubelet is built (and cached) first; each test file starts its
# own private dockerd (the same engine build as ENGINE, so kubelet meets
# Engine 29 on an Engine 29 run), cridock and kubelet.
run_e2e() {
  local engine="$1" dockerd_bin="${CRIDOCK_TEST_DOCKERD_BIN:-dockerd}"
  [[ -n "${CRIDOCK_TEST_DOCKERD_BIN:-}" || "$engine" != docker29* ]] || dockerd_bin="$DOCKER_ENGINE_BIN_DIR/dockerd"
  bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubelet.sh"
  SUITE_DIR=e2e
  # kubelet's default (generic) PLEG drives the cluster suite; CI runs this
  # suite with the evented PLEG only, to keep the run under its time budget.
  if [[ "${CRIDOCK_E2E_GENERIC_PLEG:-0}" == 1 ]]; then
    SUITE_ENV=(CRIDOCK_E2E_EVENTED_PLEG=0 CRIDOCK_TEST_DOCKERD_BIN="$dockerd_bin")
    run_tap_suite e2e "$engine" --jobs=1 --timeout=600 --disable-coverage
  fi
  SUITE_ENV=(CRIDOCK_E2E_EVENTED_PLEG=1 CRIDOCK_TEST_DOCKERD_BIN="$dockerd_bin")
  # kubelet drives paths the unit and integration runs measure already: no coverage here.
  run_tap_suite e2e-evented-pleg "$engine" --jobs=1 --timeout=600 --disable-coverage
  SUITE_DIR=""
  SUITE_ENV=()
}

# build_deb: the executable and the .deb (xz level 1, the fast build), once
# per run: the packaging and vm suites both install it. BUILT_DEB is its path.
BUILT_DEB=""
build_deb() {
  [[ -n "$BUILT_DEB" ]] && return 0
  (cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/build/binary.ts && CRIDOCK_DEB_XZ_LEVEL=1 bash scripts/build/deb.sh) </dev/null || return 1
  BUILT_DEB="$(ls -t "$CRIDOCK_REPO_ROOT"/dist/cridock_*_amd64.deb | head -n 1)"
}

# The packaging suite (test/packaging): the executable, the .deb (xz level
# 1: a few MiB larger than a release's, 40 s less CPU) and the tarball are
# built, then tested; a failed build counts as a failure.
run_packaging() {
  local engine="$1"
  echo "# ---- building the executable, the .deb and the tarball"
  if ! build_deb || ! (cd "$CRIDOCK_REPO_ROOT" && bash scripts/build/tarball.sh) </dev/null; then
    SUMMARY_ARGS+=(--failed "packaging@$engine=building the executable or the packages failed")
    return 0
  fi
  # What runs here is the bundle and the executable, which coverage does not map back to src/.
  run_tap_suite packaging "$engine" --jobs=1 --timeout=600 --disable-coverage
}

# The cluster suite (test/cluster), once, on the primary engine: a kubeadm
# cluster on cridock (scripts/cluster.sh builds or reuses kubeadm, the
# control plane and their images; its dockerd is a private one of the Engine
# 29 build), kubelet with its default PLEG (test/e2e covers the evented one),
# driven with kubectl, then a fixed part of the upstream [Conformance] suite
# on it (run_cluster_e2e). The cluster goes down whatever the tests did.
run_cluster() {
  local engine="$1" status=0
  echo "# ---- cluster@$engine (kubeadm cluster on cridock)"
  # Two nodes unless told otherwise: the second costs about 20 s of up and
  # down, and pods, Services and DNS are then tested across nodes.
  bash "$CRIDOCK_REPO_ROOT/scripts/cluster.sh" up --nodes "${CRIDOCK_CLUSTER_NODES:-2}" </dev/null >"$RESULTS_DIR/cluster-up.env" || status=$?
  if ((status != 0)); then
    SUMMARY_ARGS+=(--failed "cluster@$engine=scripts/cluster.sh up exited with $status (see $ENV_LOG_DIR/cluster-*.log)")
  else
    SUITE_ENV=(KUBECONFIG="$(sed -n 's/^export KUBECONFIG=//p' "$RESULTS_DIR/cluster-up.env")" CRIDOCK_CLUSTER_BIN_DIR="$KUBERNETES_BIN_DIR")
    # Nothing of src/ runs in the test processes (cridock is a daemon here): no coverage to gate on.
    run_tap_suite cluster "$engine" --jobs=1 --timeout=900 --disable-coverage
    SUITE_ENV=()
    run_cluster_e2e "$engine"
  fi
  bash "$CRIDOCK_REPO_ROOT/scripts/cluster.sh" down </dev/null ||
    SUMMARY_ARGS+=(--failed "cluster-down@$engine=scripts/cluster.sh down exited non-zero")
}

# run_listed_specs NAME SUITE LIST: the specs LIST names in full (one a line,
# chosen from the full runs) of one of Kubernetes' own e2e suites, through
# scripts/k8s-conformance.sh SUITE (e2e: against the cluster that is up;
# node: its own dockerd of the Engine 29 build, cridock and kubelet, torn
# down after), which builds or reuses the test binaries and the images they
# pull. Three ginkgo processes (the specs mostly wait on pods). Each listed
# spec counts in the closing line; a listed spec that did not run (renamed
# upstream, or the suite died first) or a spec run outside the list is a
# failure (scripts/k8s/spec-list-command.ts). The results stay in $ENV_LOG_DIR when
# the run failed.
run_listed_specs() {
  local name="$1" suite="$2" list="$3" status=0 focus dir
  dir="$RESULTS_DIR/$name"
  echo "# ---- $name (${suite}: the specs of $list)"
  if ! focus="$(cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/k8s/spec-list-command.ts focus "$list")"; then
    SUMMARY_ARGS+=(--failed "$name=cannot read $list")
    return 0
  fi
  CRIDOCK_CONFORMANCE_RESULTS="$dir" \
    bash "$CRIDOCK_REPO_ROOT/scripts/k8s-conformance.sh" "$suite" --procs=3 --focus="$focus" </dev/null || status=$?
  if [[ -f "$dir/report.json" ]] &&
    (cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/k8s/spec-list-command.ts count "$list" "$dir/report.json" "$dir.json"); then
    SUMMARY_ARGS+=(--counts "$name=$dir.json")
  else
    SUMMARY_ARGS+=(--failed "$name=scripts/k8s-conformance.sh $suite exited with $status and no report (see $ENV_LOG_DIR)")
  fi
  if ((status != 0)) && [[ -d "$dir" ]]; then
    rm -rf "$dir/work"
    cp -r "$dir" "$ENV_LOG_DIR/$name-$(date -u +%Y%m%dT%H%M%SZ)" && echo "# $name: results kept in $ENV_LOG_DIR"
  fi
  return 0
}

# The upstream [Conformance] specs that exercise the runtime, while the
# cluster is up.
run_cluster_e2e() {
  run_listed_specs "cluster-e2e@$1" e2e test/cluster/e2e-conformance.txt
}

# The [NodeConformance] specs that exercise the runtime, once, on the primary
# engine, after the cluster suite (both take kubelet's ports and
# /var/lib/kubelet; the cluster is down by then).
run_node_conformance() {
  run_listed_specs "node-conformance@$1" node test/node-conformance/specs.txt
}

# coverage_flag ENGINE: tap's coverage flag for the integration run on
# ENGINE. Coverage is reported (not a gate) where it says what the tests
# reach: the unit tests, the fault suite and the primary engine's
# integration run. The other engines' runs take the same code paths again,
# and collecting and reporting coverage there costs CI time for nothing.
coverage_flag() {
  [[ "$1" == "$PRIMARY" ]] || echo --disable-coverage
}

# run_conformance NAME ENGINE [critest flags...]: one critest run against a private cridock on ENGINE.
run_conformance() {
  local name="$1@$2" engine="$2"; shift 2
  echo "# ---- $name (critest $*)"
  local status=0 parallel=()
  # critest takes -parallel only above 1 (ginkgo refuses the flag given as 1).
  ((CRITEST_PROCS > 1)) && parallel=("-parallel=$CRITEST_PROCS")
  CRIDOCK_TEST_DOCKER_ENDPOINT="$(engine_endpoint "$engine")" \
    bash "$CRIDOCK_REPO_ROOT/test/conformance/run.sh" --result-json "$RESULTS_DIR/$name.json" "$@" "${parallel[@]}" </dev/null || status=$?
  if [[ -s "$RESULTS_DIR/$name.json" ]]; then
    SUMMARY_ARGS+=(--counts "$name=$RESULTS_DIR/$name.json")
  else
    SUMMARY_ARGS+=(--failed "$name=the conformance runner exited with $status before reporting")
  fi
}

# The focus lines of one area as a single Go regex (comments and blanks dropped).
focus_regex() {
  grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$CRIDOCK_REPO_ROOT/test/conformance/focus/$1.txt" | paste -sd '|'
}

choose_engines() {
  local wanted=(${CRIDOCK_TEST_ENGINES:-${ALL_ENGINES[*]}}) engine
  for engine in "${wanted[@]}"; do
    [[ " ${ALL_ENGINES[*]} " == *" $engine "* ]] || die "unknown engine '$engine' in CRIDOCK_TEST_ENGINES (${ALL_ENGINES[*]})"
    ENGINES+=("$engine")
  done
  ((${#ENGINES[@]} > 0)) || die "CRIDOCK_TEST_ENGINES names no engine"
}

# prebuild_steps SUITE...: what scripts/env/prebuild-tools.sh builds for these
# suites, in the order the suites will want it.
prebuild_steps() {
  local suites=" $* " steps=() tests=0 engine29=0
  [[ "$suites" == *" cluster "* || "$suites" == *" node-conformance "* ]] && tests=1
  [[ "$suites" == *" e2e "* || "$suites" == *" cluster "* || "$suites" == *" node-conformance "* ]] && engine29=1
  [[ " ${ENGINES[*]} " == *" docker29"* && "$suites" != " unit " ]] && engine29=1
  ((tests)) && steps+=(packages)
  # Beside the others from the start (prebuild-tools.sh): mostly downloads.
  [[ "$suites" == *" vm "* || "$suites" == *" vm-kubeadm "* || "$suites" == *" vm-lifecycle "* ]] && steps+=(vm-image)
  [[ "$suites" != " unit " ]] && steps+=(cri-tools)
  ((engine29)) && steps+=(docker-engine)
  if [[ "$suites" == *" e2e "* || "$suites" == *" cluster "* || "$suites" == *" vm"* ]] || ((tests)); then steps+=(kubernetes); fi
  [[ "$suites" == *" cluster "* || "$suites" == *" vm-kubeadm "* ]] && steps+=(cluster-images)
  ((tests)) && steps+=(kubernetes-tests conformance-images)
  printf '%s\n' "${steps[@]}"
}

# start_prebuild SUITE...: the tools those suites need, built in the
# background while the first suites run (the unit suite needs none of
# them, the integration run on Debian's engine only crictl, the first one
# built). Its session is a scheduling group of its own (autogroup; see
# start_daemon), so the builds get about half the cores against the suites
# whatever their nice value: on a fresh machine that keeps them ahead of the
# suites that need them (no suite waited more than 12 s in the fresh run
# of 4f66e25).
# Each suite still calls the install scripts it needs, which wait for a
# build in progress (tool_lock) and then find the tool in place.
PREBUILD_PID=""
start_prebuild() {
  local steps=()
  mapfile -t steps < <(prebuild_steps "$@")
  ((${#steps[@]} > 0)) || return 0
  log "building ${steps[*]} in the background (log: $ENV_LOG_DIR/prebuild.log)"
  mkdir -p "$ENV_LOG_DIR"
  # Its own process group, so that an early exit stops the whole build.
  setsid nice -n 19 bash "$CRIDOCK_REPO_ROOT/scripts/env/prebuild-tools.sh" "${steps[@]}" \
    </dev/null >"$ENV_LOG_DIR/prebuild.log" 2>&1 &
  PREBUILD_PID=$!
}

stop_prebuild() {
  [[ -n "$PREBUILD_PID" ]] && kill -0 "$PREBUILD_PID" 2>/dev/null || return 0
  log "stopping the background build (pid $PREBUILD_PID)"
  kill -TERM -- "-$PREBUILD_PID" 2>/dev/null || true
  wait "$PREBUILD_PID" 2>/dev/null || true
}

# What every suite but the unit tests needs before it runs on ENGINE:
# crictl and critest, and the Engine 29 setups when ENGINE is one of them.
# Each is done once, when the first suite needs it, so that the suites
# before it overlap the builds; the time spent waiting is reported with the
# suites' times.
CRI_TOOLS_READY=0
TEST_ENGINES_READY=0
ensure_suite_prerequisites() {
  local engine="$1" started=$SECONDS
  if ((!CRI_TOOLS_READY)); then
    bash "$CRIDOCK_REPO_ROOT/scripts/env/install-cri-tools.sh"
    CRI_TOOLS_READY=1
    TIMES+=("cri-tools (waiting for the build) $((SECONDS - started)) s")
  fi
  if [[ "$engine" == docker29* ]] && ((!TEST_ENGINES_READY)); then
    started=$SECONDS
    bash "$CRIDOCK_REPO_ROOT/scripts/env/test-engines.sh" start
    TEST_ENGINES_READY=1
    TIMES+=("Engine 29 setups (waiting for the build, starting) $((SECONDS - started)) s")
  fi
}

# run_order: the chosen engines in the order the suites run on them: those
# that need no build first (Debian's 20.10), so that a fresh machine's
# Engine 29 build overlaps a whole suite run.
run_order() {
  local engine
  for engine in "${ENGINES[@]}"; do [[ "$engine" == docker29* ]] || echo "$engine"; done
  for engine in "${ENGINES[@]}"; do [[ "$engine" != docker29* ]] || echo "$engine"; done
}

prepare() {
  require_root
  bash "$CRIDOCK_REPO_ROOT/scripts/env/setup.sh"
  ensure_node_modules
  start_prebuild "$@"
}

main() {
  local suites=("$@")
  ((${#suites[@]} > 0)) || suites=(unit integration packaging faults deno conformance e2e cluster node-conformance vm vm-lifecycle vm-kubeadm)
  choose_engines
  local setup_seconds=$SECONDS
  RESULTS_DIR="$(mktemp -d /tmp/cridock-test-results.XXXXXX)"
  # shellcheck disable=SC2064  # expand now
  trap "stop_vm_beside; stop_prebuild; rm -rf '$RESULTS_DIR'" EXIT
  prepare "${suites[@]}"
  setup_seconds=$((SECONDS - setup_seconds))
  local suite engine started
  # Unit, fault, kubelet and Deno tests run once, on the primary engine (or the first one chosen).
  PRIMARY="${ENGINES[0]}"
  [[ " ${ENGINES[*]} " == *" $PRIMARY_ENGINE "* ]] && PRIMARY="$PRIMARY_ENGINE"
  local ordered=()
  mapfile -t ordered < <(run_order)
  if [[ "${CRIDOCK_VM_BESIDE:-1}" == 1 ]]; then
    local beside=() vm_suite
    for vm_suite in vm vm-lifecycle vm-kubeadm; do [[ " ${suites[*]} " != *" $vm_suite "* ]] || beside+=("$vm_suite"); done
    # One VM suite asked for alone runs in the foreground: nothing else runs beside it.
    ((${#beside[@]} == 0 || ${#suites[@]} == ${#beside[@]})) || start_vm_beside "$PRIMARY" "${beside[@]}"
  fi
  for suite in "${suites[@]}"; do
    for engine in "${ordered[@]}"; do
      if [[ "$engine" != "$PRIMARY" ]] && ! engine_runs "$engine" "$suite"; then continue; fi
      [[ "$suite" == unit ]] || ensure_suite_prerequisites "$engine"
      started=$SECONDS
      case "$suite" in
        # tap's default 30 s a file is too short while the background builds
        # share the cores: the tsc run and the files that load all of src/
        # take twice their idle time then (typecheck 16 s idle).
        unit) run_tap_suite unit "$engine" --timeout=180 ;;
        integration) run_tap_suite integration "$engine" --jobs=1 --timeout=600 $(coverage_flag "$engine") ;;
        packaging) run_packaging "$engine" ;;
        faults) run_tap_suite faults "$engine" --jobs=1 --timeout=300 ;;
        e2e) run_e2e "$engine" ;;
        cluster) run_cluster "$engine" ;;
        node-conformance) run_node_conformance "$engine" ;;
        vm | vm-lifecycle | vm-kubeadm)
          if [[ " ${VM_BESIDE_SUITES[*]} " == *" $suite "* ]]; then
            # Collected once, at the first of them; the others ran in the same chain.
            [[ -z "$VM_BESIDE_PID" ]] || collect_vm_beside "$engine"
            continue
          fi
          run_vm_suite "$suite" "$engine"
          ;;
        deno)
          # cridock runs under Deno here, which writes no coverage Node's tooling reads.
          run_tap_suite deno "$engine" --jobs=1 --timeout=300 --disable-coverage
          # The whole critest focus once more, against cridock started with Deno.
          run_conformance conformance-deno "$engine" --runtime deno
          ;;
        conformance)
          run_conformance conformance "$engine"
          # The streaming specs again over WebSocket (kubectl's transport since 1.31), on the primary engine.
          if [[ "$engine" == "$PRIMARY" ]]; then
            run_conformance conformance-websocket "$engine" -- "-ginkgo.focus=$(focus_regex streaming)" \
              -websocket-exec -websocket-attach -websocket-portforward
          fi
          ;;
        *) die "unknown suite '$suite' (unit, integration, packaging, faults, deno, conformance, e2e, cluster, node-conformance, vm, vm-kubeadm, vm-lifecycle)" ;;
      esac
      TIMES+=("$suite@$engine $((SECONDS - started)) s")
    done
  done
  # Where the run's time went: CI has a budget, and this is what it is spent on.
  echo "# ---- time per suite"
  printf '#   %s\n' "setup $setup_seconds s" "${TIMES[@]}"
  # And the background builds' own steps (they overlap the suites above).
  [[ -z "$PREBUILD_PID" ]] || sed -n 's/^cridock-env: prebuild: /#   background: /p' "$ENV_LOG_DIR/prebuild.log"
  echo "# ---- summary"
  (cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/suite/summary.ts "${SUMMARY_ARGS[@]}")
}

main "$@"
