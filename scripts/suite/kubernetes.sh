# shellcheck shell=bash disable=SC2034  # SUITE_DIR and SUITE_ENV are test.sh's, read by run_tap_suite
# The suites of scripts/test.sh (which sources this file) that need
# Kubernetes' binaries: the kubelet suite (test/e2e), the kubeadm cluster
# suite (scripts/cluster.sh up, kubectl against it, a listed part of the
# upstream [Conformance] specs, down) and the listed [NodeConformance] specs
# (scripts/k8s-conformance.sh node). Uses run_tap_suite (scripts/suite/tap.sh)
# and test.sh's globals RESULTS_DIR, SUMMARY_ARGS, SUITE_DIR and SUITE_ENV.

# The kubelet suite (test/e2e), with the evented PLEG (and the generic one on
# request). kubelet is built (and cached) first; each test file starts its
# own private dockerd (the same engine build as ENGINE, so kubelet meets
# Engine 29 on an Engine 29 run), cridock and kubelet. Its kubelet is the
# previous release's (KUBERNETES_PREVIOUS_VERSION, or the release that
# CRIDOCK_E2E_KUBERNETES_VERSION names): every run keeps this one lane on the
# kubelet most nodes still run, while the cluster, node-conformance and VM
# suites run the current release.
run_e2e() {
  local engine="$1" dockerd_bin="${CRIDOCK_TEST_DOCKERD_BIN:-dockerd}"
  local kubernetes="${CRIDOCK_E2E_KUBERNETES_VERSION:-$KUBERNETES_PREVIOUS_VERSION}"
  [[ -n "${CRIDOCK_TEST_DOCKERD_BIN:-}" || "$engine" != docker29* ]] || dockerd_bin="$DOCKER_ENGINE_BIN_DIR/dockerd"
  echo "# kubelet $kubernetes drives the kubelet suite"
  CRIDOCK_KUBERNETES_VERSION="$kubernetes" bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubelet.sh"
  SUITE_DIR=e2e
  # kubelet's default (generic) PLEG drives the cluster suite; CI runs this
  # suite with the evented PLEG only, to keep the run under its time budget.
  if [[ "${CRIDOCK_E2E_GENERIC_PLEG:-0}" == 1 ]]; then
    SUITE_ENV=(CRIDOCK_E2E_EVENTED_PLEG=0 CRIDOCK_TEST_DOCKERD_BIN="$dockerd_bin" CRIDOCK_KUBERNETES_VERSION="$kubernetes")
    run_tap_suite e2e "$engine" --jobs=1 --timeout=600 --disable-coverage
  fi
  SUITE_ENV=(CRIDOCK_E2E_EVENTED_PLEG=1 CRIDOCK_TEST_DOCKERD_BIN="$dockerd_bin" CRIDOCK_KUBERNETES_VERSION="$kubernetes")
  # kubelet drives paths the unit and integration runs measure already: no coverage here.
  run_tap_suite e2e-evented-pleg "$engine" --jobs=1 --timeout=600 --disable-coverage
  SUITE_DIR=""
  SUITE_ENV=()
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
