# shellcheck shell=bash
# The critest conformance runs of scripts/test.sh (which sources this file):
# one run against a private cridock on an engine setup (test/conformance/run.sh),
# its JSON counts kept for the summary. Uses test.sh's globals RESULTS_DIR,
# SUMMARY_ARGS and CRITEST_PROCS, and engine_endpoint (scripts/suite/tap.sh).

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

# The focus lines of one area as a single Go regex (comments and blanks
# dropped). Fails when the area's file is missing or lists nothing (grep
# finds no line).
focus_regex() {
  grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$CRIDOCK_REPO_ROOT/test/conformance/focus/$1.txt" | paste -sd '|'
}

# run_websocket_conformance ENGINE: the streaming specs again over WebSocket
# (kubectl's transport since 1.31). An empty focus would run every spec:
# that is a failure instead.
run_websocket_conformance() {
  local engine="$1" focus
  if focus="$(focus_regex streaming)" && [[ -n "$focus" ]]; then
    run_conformance conformance-websocket "$engine" -- "-ginkgo.focus=$focus" \
      -websocket-exec -websocket-attach -websocket-portforward
  else
    SUMMARY_ARGS+=(--failed "conformance-websocket@$engine=no focus in test/conformance/focus/streaming.txt")
  fi
}
