#!/usr/bin/env bash
# Kubernetes' own node performance specs on cridock, and on cri-dockerd beside
# it: e2e_node.test's `[sig-node] Density [Serial] [Slow]` and
# `[sig-node] Resource-usage [Serial] [Slow]`, through scripts/k8s-conformance.sh
# node (its own API server and kubelet, a private Engine 29 dockerd, the CRI
# runtime in /docker-daemon with dockerd; scripts/k8s/conformance-node.sh).
# A benchmark, not a test: CI does not run it.
#
# The specs measure the node through a cAdvisor pod
# (gcr.io/cadvisor/cadvisor, hostNetwork, port 8090): their "runtime" is the
# cgroup of the process --container-runtime-pid-file names, dockerd's, which
# the runtime shares, so cridock's figures and cri-dockerd's each count
# dockerd with them. "kubelet" is kubelet's own cgroup.
#
#   --specs limits     (default) the specs that assert limits: a batch of 10
#                      pods, a sequence of 10 beside 50 background pods
#                      (both [Flaky] upstream), and 10 pods tracked for 10 min
#   --specs benchmark  the [Benchmark] batches of 35 and 90 pods (no interval)
#   --specs all        both
#   --compare-cri-dockerd BIN   then the same specs on a cri-dockerd binary
#                      (built outside the repository), and the report's ratios
#   --results DIR      where the runs go (default
#                      /var/tmp/cridock-node-perf/<UTC time>): DIR/cridock,
#                      DIR/cri-dockerd, and DIR/report.md
#
# It builds the cAdvisor stats server (scripts/env/install-cadvisor.sh) and
# its image, pushed to the test environment's mirror, which
# scripts/env/setup.sh must have started; k8s-conformance.sh builds the rest.
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../env/common.sh"

LIMIT_SPECS='Density .*create a batch of pods.* create 10 pods with 0s interval|Density .*create a sequence of pods.* create 10 pods with 50 background pods|Resource-usage .*resource tracking for 10 pods per node'
BENCHMARK_SPECS='Density .*create a batch of pods.* create (35|90) pods with 0s interval \[Benchmark\]'

usage() {
  die "usage: node-perf.sh [--specs limits|benchmark|all] [--compare-cri-dockerd BIN] [--results DIR]"
}

# focus_and_skip SET: the ginkgo --focus and --skip of a spec set, one a line.
focus_and_skip() {
  case "$1" in
    limits) printf '%s\n%s\n' "--focus=$LIMIT_SPECS" '--skip=\[Benchmark\]' ;;
    benchmark) printf '%s\n%s\n' "--focus=$BENCHMARK_SPECS" '--skip=QPS' ;;
    all) printf '%s\n%s\n' "--focus=$LIMIT_SPECS|$BENCHMARK_SPECS" '--skip=QPS|resource tracking for [0-9]+ pods per node \[Benchmark\]' ;;
    *) usage ;;
  esac
}

build_cadvisor_image() {
  local bin_dir
  bin_dir="$(bash "$CRIDOCK_REPO_ROOT/scripts/env/install-cadvisor.sh")"
  log "building and pushing the cAdvisor image (log: $ENV_LOG_DIR/images.log)"
  (cd "$CRIDOCK_REPO_ROOT" &&
    CRIDOCK_CADVISOR_BIN_DIR="$bin_dir" node_modules/.bin/tsx scripts/env/images/build.ts --state-dir "$ENV_STATE_DIR" --set node-perf) \
    2>>"$ENV_LOG_DIR/images.log" || die "building the cAdvisor image failed; see $ENV_LOG_DIR/images.log"
}

# run_specs NAME DIR FOCUS SKIP [CRI_DOCKERD]: the specs on one runtime; their results in DIR/NAME.
run_specs() {
  local name="$1" dir="$2" focus="$3" skip="$4" cri_dockerd="${5:-}" started="$SECONDS" status=0
  log "$name: running the node performance specs (results: $dir/$name)"
  CRIDOCK_CONFORMANCE_RESULTS="$dir/$name" CRIDOCK_NODE_SUITE_CRI_DOCKERD="$cri_dockerd" \
    bash "$CRIDOCK_REPO_ROOT/scripts/k8s-conformance.sh" node "$focus" "$skip" || status=$?
  log "$name: done in $((SECONDS - started)) s (exit $status)"
  return "$status"
}

main() {
  require_root
  local specs=limits cri_dockerd="" dir=""
  while (($#)); do
    case "$1" in
      --specs) specs="${2:-}"; shift 2 || usage ;;
      --compare-cri-dockerd) cri_dockerd="${2:-}"; shift 2 || usage ;;
      --results) dir="${2:-}"; shift 2 || usage ;;
      *) usage ;;
    esac
  done
  local lines
  mapfile -t lines < <(focus_and_skip "$specs")
  ((${#lines[@]} == 2)) || usage
  [[ -z "$cri_dockerd" || -x "$cri_dockerd" ]] || die "--compare-cri-dockerd: $cri_dockerd is not an executable"
  dir="${dir:-/var/tmp/cridock-node-perf/$(date -u +%Y%m%dT%H%M%SZ)}"
  case "$dir" in "$CRIDOCK_REPO_ROOT" | "$CRIDOCK_REPO_ROOT"/*) die "results belong outside the checkout: $dir" ;; esac
  mkdir -p "$dir" "$ENV_LOG_DIR"
  dir="$(cd "$dir" && pwd)"
  build_cadvisor_image
  local status=0 runs=("$dir/cridock")
  run_specs cridock "$dir" "${lines[0]}" "${lines[1]}" || status=$?
  if [[ -n "$cri_dockerd" ]]; then
    run_specs cri-dockerd "$dir" "${lines[0]}" "${lines[1]}" "$cri_dockerd" || status=$?
    runs+=("$dir/cri-dockerd")
  fi
  (cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/bench/node-perf-report.ts "${runs[@]}") | tee "$dir/report.md"
  log "report: $dir/report.md"
  return "$status"
}

main "$@"
