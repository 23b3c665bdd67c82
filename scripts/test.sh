#!/usr/bin/env bash
# Runs cridock's whole test suite on this machine (Debian, as root): sets the
# environment up, then runs in order the unit tests, the integration tests
# (one file at a time: they share dockerd), the fault suite (kill -9 loops,
# log integrity across restarts, races, a gRPC fuzzer; bounded to a few
# minutes), the kubelet end-to-end tests (twice: kubelet's generic PLEG, then
# evented PLEG), the Deno tests (the smoke tests, then the critest focus
# against cridock under Deno) and the critest conformance runs. Ends with one
# line "N passed, N failed" (tap test points plus critest specs) and exits
# non-zero if anything failed.
#
# Usage: scripts/test.sh [unit|integration|faults|e2e|deno|conformance]...   (default: all, in that order)
set -euo pipefail

# shellcheck source=scripts/lib/env-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/env-common.sh"

RESULTS_DIR=""
SUMMARY_ARGS=()
# Set around a run_tap_suite call: the test directory when it differs from
# the suite's name, and extra environment for tap.
SUITE_DIR=""
SUITE_ENV=()

# The test files of a suite directory (sorted, so runs are repeatable).
suite_files() {
  find "$CRIDOCK_REPO_ROOT/test/$1" -type f -name '*.test.ts' 2>/dev/null | sort
}

# run_tap_suite NAME [TAP FLAGS...]: tap on test/NAME/**/*.test.ts, TAP kept for counting.
run_tap_suite() {
  local name="$1"; shift
  local files=() status
  mapfile -t files < <(suite_files "${SUITE_DIR:-$name}")
  if ((${#files[@]} == 0)); then
    echo "# $name: no test files yet"
    return 0
  fi
  echo "# ---- $name tests (${#files[@]} files)"
  set +e
  (cd "$CRIDOCK_REPO_ROOT" && env "${SUITE_ENV[@]}" node_modules/.bin/tap --reporter=tap --no-color "$@" "${files[@]}") </dev/null | tee "$RESULTS_DIR/$name.tap"
  status="${PIPESTATUS[0]}"
  set -e
  SUMMARY_ARGS+=(--tap "$name=$RESULTS_DIR/$name.tap")
  # tap may fail without a failing test point (a coverage or runner error): count that too.
  if ((status != 0)); then
    SUMMARY_ARGS+=(--exit-status "$name=$status")
  fi
}

# The kubelet suite (test/e2e), once per PLEG mode. kubelet is built (and
# cached) first; each test file starts its own private dockerd, cridock and
# kubelet.
run_e2e() {
  bash "$CRIDOCK_REPO_ROOT/scripts/install-kubelet.sh"
  SUITE_DIR=e2e
  SUITE_ENV=(CRIDOCK_E2E_EVENTED_PLEG=0)
  run_tap_suite e2e --jobs=1 --timeout=600
  SUITE_ENV=(CRIDOCK_E2E_EVENTED_PLEG=1)
  run_tap_suite e2e-evented-pleg --jobs=1 --timeout=600
  SUITE_DIR=""
  SUITE_ENV=()
}

# run_conformance NAME [critest flags...]: one critest run against a private cridock.
run_conformance() {
  local name="$1"; shift
  echo "# ---- $name (critest $*)"
  local status=0
  bash "$CRIDOCK_REPO_ROOT/test/conformance/run.sh" --result-json "$RESULTS_DIR/$name.json" "$@" </dev/null || status=$?
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

prepare() {
  require_root
  bash "$CRIDOCK_REPO_ROOT/scripts/env-setup.sh"
  bash "$CRIDOCK_REPO_ROOT/scripts/install-cri-tools.sh"
  ensure_node_modules
}

main() {
  local suites=("$@")
  ((${#suites[@]} > 0)) || suites=(unit integration faults e2e deno conformance)
  prepare
  RESULTS_DIR="$(mktemp -d /tmp/cridock-test-results.XXXXXX)"
  # shellcheck disable=SC2064  # expand now
  trap "rm -rf '$RESULTS_DIR'" EXIT
  local suite
  for suite in "${suites[@]}"; do
    case "$suite" in
      unit) run_tap_suite unit ;;
      integration) run_tap_suite integration --jobs=1 --timeout=600 ;;
      faults) run_tap_suite faults --jobs=1 --timeout=300 ;;
      e2e) run_e2e ;;
      deno)
        run_tap_suite deno --jobs=1 --timeout=300
        # The whole critest focus once more, against cridock started with Deno.
        run_conformance conformance-deno --runtime deno
        ;;
      conformance)
        run_conformance conformance
        # The streaming specs again over WebSocket (kubectl's transport since 1.31).
        run_conformance conformance-websocket -- "-ginkgo.focus=$(focus_regex streaming)" \
          -websocket-exec -websocket-attach -websocket-portforward
        ;;
      *) die "unknown suite '$suite' (unit, integration, faults, e2e, deno, conformance)" ;;
    esac
  done
  echo "# ---- summary"
  (cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/test-summary.ts "${SUMMARY_ARGS[@]}")
}

main "$@"
