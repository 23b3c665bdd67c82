# shellcheck shell=bash
# The tap suites of scripts/test.sh (which sources this file): which files a
# suite has on an engine, running tap on them against an engine setup, and
# what the run's summary counts of it (SUMMARY_ARGS: the TAP stream and a
# non-zero exit). Uses test.sh's globals RESULTS_DIR, PRIMARY, SUMMARY_ARGS,
# SUITE_DIR and SUITE_ENV.

# engine_endpoint ENGINE: the engine setup's CRIDOCK_TEST_DOCKER_ENDPOINT.
engine_endpoint() {
  case "$1" in
    docker20.10) echo "unix://$DOCKER_SOCKET" ;;
    *) test_engine_endpoint "$1" ;;
  esac
}

# suite_files SUITE ENGINE: the test files of a suite on an engine (sorted, so
# runs are repeatable); scripts/suite/plan.ts decides which.
suite_files() {
  (cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/suite/plan.ts files "$1" "$2" "$PRIMARY")
}

# run_tap_suite SUITE ENGINE [TAP FLAGS...]: tap on the suite's files against ENGINE, TAP kept for counting.
run_tap_suite() {
  local suite="$1" engine="$2"; shift 2
  local name="$suite@$engine" listing
  # Checked, not read through a process substitution: a listing that failed
  # would read as "no test files" and pass.
  if ! listing="$(suite_files "${SUITE_DIR:-$suite}" "$engine")"; then
    SUMMARY_ARGS+=(--failed "$name=its test files could not be listed (scripts/suite/plan.ts files)")
    return 0
  fi
  TAP_ENDPOINT="$(engine_endpoint "$engine")" run_tap_files "$name" "$listing" "$@"
}

# run_tap_files NAME FILES [TAP FLAGS...]: tap on FILES (one a line, or
# separated by spaces) with SUITE_ENV, its TAP kept for counting as NAME;
# against the host's engine setup at TAP_ENDPOINT when the caller sets it
# (run_tap_suite; the VM suites' files use the guest's own engine).
run_tap_files() {
  local name="$1" listing="$2" files=() status endpoint="${TAP_ENDPOINT:-}"; shift 2
  [[ -z "${listing//[[:space:]]/}" ]] || read -r -d '' -a files <<<"$listing" || true
  if ((${#files[@]} == 0)); then
    echo "# $name: no test files yet"
    return 0
  fi
  echo "# ---- $name tests (${#files[@]} files)"
  set +e
  (cd "$CRIDOCK_REPO_ROOT" && env "${SUITE_ENV[@]}" ${endpoint:+CRIDOCK_TEST_DOCKER_ENDPOINT="$endpoint"} \
    node_modules/.bin/tap --reporter=tap --no-color "$@" "${files[@]}") </dev/null | tee "$RESULTS_DIR/$name.tap"
  status="${PIPESTATUS[0]}"
  set -e
  SUMMARY_ARGS+=(--tap "$name=$RESULTS_DIR/$name.tap")
  # tap may fail without a failing test point (a coverage or runner error): count that too.
  if ((status != 0)); then
    SUMMARY_ARGS+=(--exit-status "$name=$status")
  fi
}

# coverage_flag ENGINE: tap's coverage flag for the integration run on
# ENGINE. Coverage is reported (not a gate) where it says what the tests
# reach: the unit tests, the fault suite and the primary engine's
# integration run. The other engines' runs take the same code paths again,
# and collecting and reporting coverage there costs CI time for nothing.
coverage_flag() {
  [[ "$1" == "$PRIMARY" ]] || echo --disable-coverage
}
