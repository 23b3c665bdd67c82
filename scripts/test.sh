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
# node), and last the cgroup v2 node's suites (Debian VMs of
# scripts/vm/node.sh with the .deb installed: vm, a kubelet with the systemd
# driver and critest, on Debian 13's docker.io and then Engine 29's two
# image stores; vm-lifecycle, reboots and checkpoints; vm-kubeadm, kubeadm
# init there), which run beside all the others from the start. The suites that
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
# CRIDOCK_VM_BESIDE=0 runs the VM suites in their turn instead of beside the
# others; CRIDOCK_VM_BUDGET_S (default 4500) is how old the run may be
# when a VM step after the first is expected to end (scripts/suite/vm.sh). CRIDOCK_CLUSTER_NODES
# (default 2), CRIDOCK_E2E_GENERIC_PLEG and CRIDOCK_TEST_DOCKERD_BIN are read
# by scripts/suite/kubernetes.sh.
#
# Usage: scripts/test.sh [unit|integration|packaging|faults|deno|conformance|e2e|cluster|node-conformance|vm|vm-lifecycle|vm-kubeadm]...
#        (default: all, in that order; the VM suites beside the others when
#        others are named too, in the foreground when they alone are)
#
# The parts: scripts/suite/plan.ts decides the run's plan (the suites, the
# engines each runs on, their order, the background build's steps, a
# suite's test files); scripts/suite/prebuild.sh builds and awaits the tools,
# tap.sh runs the tap suites, critest.sh the critest runs, packaging.sh
# builds the packages, kubernetes.sh runs the suites that need Kubernetes'
# binaries, vm.sh the cgroup v2 node's; scripts/suite/summary.ts adds the
# results up. This file holds the run's state and its order.
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/env/common.sh"
# shellcheck source=scripts/suite/tap.sh
source "$(dirname "${BASH_SOURCE[0]}")/suite/tap.sh"
# shellcheck source=scripts/suite/critest.sh
source "$(dirname "${BASH_SOURCE[0]}")/suite/critest.sh"
# shellcheck source=scripts/suite/packaging.sh
source "$(dirname "${BASH_SOURCE[0]}")/suite/packaging.sh"
# shellcheck source=scripts/suite/kubernetes.sh
source "$(dirname "${BASH_SOURCE[0]}")/suite/kubernetes.sh"
# shellcheck source=scripts/suite/vm.sh
source "$(dirname "${BASH_SOURCE[0]}")/suite/vm.sh"
# shellcheck source=scripts/suite/prebuild.sh
source "$(dirname "${BASH_SOURCE[0]}")/suite/prebuild.sh"

RESULTS_DIR=""
SUMMARY_ARGS=()
# The run's plan (load_plan): the engine the once-only suites run on (the
# primary, or the first chosen), the VM suites run beside the others, the
# background build's steps, and the suite runs in order ("SUITE ENGINE").
PRIMARY=""
PLAN_BESIDE=()
PLAN_PREBUILD=()
PLAN_RUNS=()
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

# load_plan SUITE...: the run's plan from scripts/suite/plan.ts (it reads
# CRIDOCK_TEST_ENGINES and CRIDOCK_VM_BESIDE). An unknown engine or suite
# ends the run here, with plan.ts's message.
load_plan() {
  local plan key rest
  plan="$(cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/suite/plan.ts plan "$@")" || exit 1
  while read -r key rest; do
    case "$key" in
      primary) PRIMARY="$rest" ;;
      beside) read -ra PLAN_BESIDE <<<"$rest" ;;
      prebuild) read -ra PLAN_PREBUILD <<<"$rest" ;;
      run) PLAN_RUNS+=("$rest") ;;
      *) die "scripts/suite/plan.ts plan: unexpected line '$key $rest'" ;;
    esac
  done <<<"$plan"
}

# node_modules comes before the plan (plan.ts runs with tsx) and before the
# setup (setup.sh then finds it in place), so that an unknown engine or
# suite ends the run before the setup's minutes.
prepare() {
  require_root
  ensure_node_modules
  # From here on tap, tsx and every cridock of the suites run on the Node the package ships.
  use_pinned_node
  load_plan "$@"
  # An earlier run killed in the middle (on this machine, CI's or a
  # developer's) may have left pinned namespaces and a bridge that the
  # suites' leak checks would count as theirs.
  bash "$CRIDOCK_REPO_ROOT/scripts/env/killed-run.sh"
  bash "$CRIDOCK_REPO_ROOT/scripts/env/setup.sh"
  start_prebuild "${PLAN_PREBUILD[@]}"
}

# run_suite SUITE ENGINE: one suite run.
run_suite() {
  local suite="$1" engine="$2"
  # shellcheck disable=SC2046  # coverage_flag's flag, or nothing
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
    vm | vm-lifecycle | vm-kubeadm) run_vm_chain "$suite" ;;
    deno)
      # cridock runs under Deno here, which writes no coverage Node's tooling reads.
      run_tap_suite deno "$engine" --jobs=1 --timeout=300 --disable-coverage
      # The whole critest focus once more, against cridock started with Deno.
      run_conformance conformance-deno "$engine" --runtime deno
      ;;
    conformance)
      run_conformance conformance "$engine"
      # The streaming specs again over WebSocket, on the primary engine.
      if [[ "$engine" == "$PRIMARY" ]]; then
        run_websocket_conformance "$engine"
      fi
      ;;
    *) die "unknown suite '$suite'" ;;
  esac
}

main() {
  local setup_seconds=$SECONDS
  RESULTS_DIR="$(mktemp -d /tmp/cridock-test-results.XXXXXX)"
  # shellcheck disable=SC2064  # expand now
  trap "stop_vm_beside; stop_prebuild; rm -rf '$RESULTS_DIR'" EXIT
  prepare "$@"
  setup_seconds=$((SECONDS - setup_seconds))
  ((${#PLAN_BESIDE[@]} == 0)) || start_vm_beside "${PLAN_BESIDE[@]}"
  local run suite engine started
  for run in "${PLAN_RUNS[@]}"; do
    read -r suite engine <<<"$run"
    [[ "$suite" == unit ]] || ensure_suite_prerequisites "$engine"
    if [[ " ${PLAN_BESIDE[*]} " == *" $suite "* ]]; then
      # Collected once, at the first of them; the others ran in the same chain.
      [[ -z "$VM_BESIDE_PID" ]] || collect_vm_beside
      continue
    fi
    started=$SECONDS
    run_suite "$suite" "$engine"
    TIMES+=("$suite@$engine $((SECONDS - started)) s")
  done
  # A build still going is stopped now, so that its message comes before the
  # summary, whose line must be the run's last (.ci/run reads it there).
  stop_prebuild
  # Where the run's time went: CI has a budget, and this is what it is spent on.
  echo "# ---- time per suite"
  printf '#   %s\n' "setup $setup_seconds s" "${TIMES[@]}"
  # And the background builds' own steps (they overlap the suites above).
  [[ -z "$PREBUILD_PID" ]] || sed -n 's/^cridock-env: prebuild: /#   background: /p' "$ENV_LOG_DIR/prebuild.log"
  echo "# ---- summary"
  # The timings go along for CRIDOCK_RECORD_RESULTS (docs/results/ci-times.jsonl); unasked, nothing is written.
  local -a timing_args=(--run-seconds "$SECONDS" --command "bash scripts/test.sh${*:+ $*}")
  local line
  for line in "setup $setup_seconds s" "${TIMES[@]}"; do timing_args+=(--time "$line"); done
  if [[ -n "$PREBUILD_PID" ]]; then
    while IFS= read -r line; do timing_args+=(--time "$line"); done < <(sed -n 's/^cridock-env: prebuild: \(.* done in [0-9]* s\)$/\1/p' "$ENV_LOG_DIR/prebuild.log")
  fi
  (cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/suite/summary.ts "${SUMMARY_ARGS[@]}" "${timing_args[@]}")
}

main "$@"
