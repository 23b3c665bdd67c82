#!/usr/bin/env bash
# Runs one of Kubernetes' own e2e suites against cridock and leaves its
# results: the JUnit and ginkgo JSON reports, and per-spec lists of passed,
# failed and skipped (scripts/k8s/conformance-results.ts).
#
#   k8s-conformance.sh e2e  [ginkgo flags] [-- e2e.test flags]
#       e2e.test against the kubeadm cluster of scripts/cluster.sh (brought up
#       if it is not, and down again after if this run brought it up), with
#       --provider=local. Default focus: [Conformance].
#   k8s-conformance.sh node [ginkgo flags] [-- e2e_node.test flags]
#       e2e_node.test with its own etcd, API server and kubelet, the kubelet
#       on a private cridock on a private Engine 29 dockerd
#       (scripts/k8s/conformance-node.sh), all torn down after. Default focus:
#       [NodeConformance], skipping [Flaky], [Slow], [Serial] and [Disruptive].
#       With CRIDOCK_NODE_SUITE_CRI_DOCKERD set to a cri-dockerd binary, the
#       kubelet runs on that instead of cridock (scripts/bench/node-perf.sh).
#
# Ginkgo flags are the ginkgo CLI's (--focus, --skip, --label-filter,
# --procs, --dry-run, ...); a --focus or --skip given replaces the default.
# Results go to $CRIDOCK_CONFORMANCE_RESULTS (default
# /var/tmp/cridock-conformance/<suite>-<UTC time>), never into the checkout.
#
# It builds what is missing first: the Kubernetes binaries and the test
# binaries (install-kubernetes.sh --with-tests) and the images the suites pull
# (conformance-images.sh), served by the test environment's TLS mirror, which
# scripts/env/setup.sh must have started. Both suites run a kubelet on
# kubelet's fixed ports and /var/lib/kubelet: never two at once, and node
# never while the cluster is up.
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/env/common.sh"
# shellcheck source=scripts/k8s/cluster-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s/cluster-common.sh"
# shellcheck source=scripts/k8s/conformance-e2e.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s/conformance-e2e.sh"
# shellcheck source=scripts/k8s/conformance-node.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s/conformance-node.sh"

E2E_DEFAULT_FOCUS='\[Conformance\]'
NODE_DEFAULT_FOCUS='\[NodeConformance\]'
NODE_DEFAULT_SKIP='\[Flaky\]|\[Slow\]|\[Serial\]|\[Disruptive\]'
NODE_NAME="cridock-node-e2e"

usage() {
  die "usage: k8s-conformance.sh e2e|node [ginkgo flags] [-- test binary flags]"
}

# has_flag NAME ARGS...: whether ARGS set the ginkgo flag NAME (-NAME or --NAME, with = or not).
has_flag() {
  local name="$1" arg; shift
  for arg in "$@"; do
    case "$arg" in -"$name" | --"$name" | -"$name"=* | --"$name"=*) return 0 ;; esac
  done
  return 1
}

prepare() {
  [[ -x "$CRIDOCK_TOOLS_DIR/bin/crictl" ]] || bash "$CRIDOCK_REPO_ROOT/scripts/env/install-cri-tools.sh"
  bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubernetes.sh" --with-tests
  bash "$CRIDOCK_REPO_ROOT/scripts/env/conformance-images.sh"
}

# summarize DIR: the per-spec lists from the ginkgo JSON report.
summarize() {
  local dir="$1"
  if [[ -f "$dir/report.json" ]]; then
    (cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/k8s/conformance-results.ts "$dir/report.json" "$dir") |
      tee "$dir/counts.txt" >&2
  else
    log "no ginkgo report in $dir"
  fi
}

# split_args ARGS...: the caller's arguments before -- (ginkgo's) into
# USER_GINKGO_ARGS, those after it (the test binary's) into USER_BINARY_ARGS.
USER_GINKGO_ARGS=()
USER_BINARY_ARGS=()
split_args() {
  local arg seen=false
  for arg in "$@"; do
    if ! "$seen" && [[ "$arg" == "--" ]]; then seen=true; continue; fi
    if "$seen"; then USER_BINARY_ARGS+=("$arg"); else USER_GINKGO_ARGS+=("$arg"); fi
  done
}

# run_ginkgo DIR BINARY GINKGO_ARGS_COUNT GINKGO_ARGS... BINARY_ARGS...
# The ginkgo CLI runs a compiled suite in the suite's own directory, where
# e2e_node.test writes its kubeconfig, kubelet config and static pod
# directory: the suite runs through a link in DIR/work, never in the tools cache.
run_ginkgo() {
  local dir="$1" binary="$2" count="$3"; shift 3
  local ginkgo_args=("${@:1:count}") binary_args=("${@:count+1}") status=0 work="$dir/work"
  mkdir -p "$work"
  ln -sfn "$binary" "$work/$(basename "$binary")"
  log "running $(basename "$binary") (results: $dir)"
  "$KUBERNETES_TEST_BIN_DIR/ginkgo" --output-dir="$dir" --junit-report=junit.xml --json-report=report.json \
    --no-color --timeout=24h "${ginkgo_args[@]}" "$work/$(basename "$binary")" -- "${binary_args[@]}" \
    >"$dir/suite.log" 2>&1 || status=$?
  log "$(basename "$binary") exited $status; log: $dir/suite.log"
  summarize "$dir"
  return "$status"
}

# --- e2e --------------------------------------------------------------------

run_e2e() {
  local dir="$1"; shift
  local ginkgo_args=() brought_up=false status=0
  split_args "$@"
  has_flag focus "${USER_GINKGO_ARGS[@]}" || has_flag label-filter "${USER_GINKGO_ARGS[@]}" ||
    ginkgo_args+=("--focus=$E2E_DEFAULT_FOCUS")
  ginkgo_args+=("${USER_GINKGO_ARGS[@]}")
  if ! bash "$CRIDOCK_REPO_ROOT/scripts/cluster.sh" status 2>/dev/null; then
    bash "$CRIDOCK_REPO_ROOT/scripts/cluster.sh" up >/dev/null
    brought_up=true
  fi
  e2e_binary_flags "$dir"
  # The caller's binary flags come last: Go's flag package keeps the last value.
  run_ginkgo "$dir" "$KUBERNETES_TEST_BIN_DIR/e2e.test" "${#ginkgo_args[@]}" "${ginkgo_args[@]}" \
    "${E2E_BINARY_FLAGS[@]}" "${USER_BINARY_ARGS[@]}" || status=$?
  if "$brought_up"; then bash "$CRIDOCK_REPO_ROOT/scripts/cluster.sh" down || status=1; fi
  return "$status"
}

# --- node -------------------------------------------------------------------

# The suite writes its kubeconfig, kubelet config and static pod directory
# into its working directory, and kubelet's root is fixed: remove what it left
# there when it was not there before.
run_node() {
  local dir="$1"; shift
  local ginkgo_args=() status=0 kubelet_root_existed=false
  split_args "$@"
  has_flag focus "${USER_GINKGO_ARGS[@]}" || has_flag label-filter "${USER_GINKGO_ARGS[@]}" ||
    ginkgo_args+=("--focus=$NODE_DEFAULT_FOCUS")
  has_flag skip "${USER_GINKGO_ARGS[@]}" || has_flag label-filter "${USER_GINKGO_ARGS[@]}" ||
    ginkgo_args+=("--skip=$NODE_DEFAULT_SKIP")
  ginkgo_args+=("${USER_GINKGO_ARGS[@]}")
  bash "$CRIDOCK_REPO_ROOT/scripts/cluster.sh" status 2>/dev/null &&
    die "the kubeadm cluster is up: its kubelet holds the ports the node suite's kubelet needs (scripts/cluster.sh down)"
  pgrep -x kubelet >/dev/null && die "a kubelet runs on this host already (pid $(pgrep -x kubelet | paste -sd ' ')); the node suite's needs its ports"
  [[ -e "$NODE_SUITE_KUBELET_ROOT" ]] && kubelet_root_existed=true
  node_suite_down
  trap 'node_suite_down' EXIT
  start_node_dockerd
  start_node_cridock
  local path
  path="$(node_suite_path "$dir/path")"
  # Beside the test binary (run_ginkgo links it into $dir/work): e2e_node.test looks for
  # kubelet in its own directory (its --k8s-bin-dir went in Kubernetes 1.37).
  node_kubelet_bin_dir "$dir/work" >/dev/null
  write_node_kubelet_config "$dir/kubelet-base-config.yaml"
  # --system-cgroups= : kubelet would otherwise move every process in the
  # host's root cgroup into /system, which is not its to do on a shared host.
  (PATH="$path" run_ginkgo "$dir" "$KUBERNETES_TEST_BIN_DIR/e2e_node.test" "${#ginkgo_args[@]}" "${ginkgo_args[@]}" \
    --container-runtime-endpoint="unix://$NODE_SUITE_CRI_SOCKET" \
    --container-runtime-process-name=dockerd \
    --container-runtime-pid-file="$NODE_SUITE_RUN_DIR/dockerd.pid" \
    --prepull-images=false \
    --kubelet-config-file="$dir/kubelet-base-config.yaml" \
    --kubelet-flags="--system-cgroups=" \
    --node-name="$NODE_NAME" \
    --report-dir="$dir" "${USER_BINARY_ARGS[@]}") || status=$?
  node_suite_down
  trap - EXIT
  if ! "$kubelet_root_existed"; then
    unmount_beneath "$NODE_SUITE_KUBELET_ROOT"
    rm -rf "$NODE_SUITE_KUBELET_ROOT"
  fi
  rm -rf "$dir/path" "$dir/work"
  return "$status"
}

main() {
  require_root
  local suite="${1:-}"
  [[ "$suite" == e2e || "$suite" == node ]] || usage
  shift
  local dir="${CRIDOCK_CONFORMANCE_RESULTS:-/var/tmp/cridock-conformance/$suite-$(date -u +%Y%m%dT%H%M%SZ)}"
  case "$dir" in "$CRIDOCK_REPO_ROOT" | "$CRIDOCK_REPO_ROOT"/*) die "results belong outside the checkout: $dir" ;; esac
  mkdir -p "$dir" "$ENV_LOG_DIR"
  dir="$(cd "$dir" && pwd)"
  prepare
  local started="$SECONDS" status=0
  if [[ "$suite" == e2e ]]; then run_e2e "$dir" "$@" || status=$?; else run_node "$dir" "$@" || status=$?; fi
  log "$suite suite done in $((SECONDS - started)) s (exit $status); results in $dir"
  return "$status"
}

main "$@"
