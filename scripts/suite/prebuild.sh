# shellcheck shell=bash
# The tools scripts/test.sh's suites need (it sources this file): built in
# the background from the start of the run (scripts/env/prebuild-tools.sh,
# the steps the plan names: scripts/suite/plan.ts, prebuildSteps), stopped
# on an early exit, and awaited when the first suite that needs them runs.
# Uses test.sh's TIMES.

# start_prebuild STEP...: the tools the run's suites need (the plan's
# prebuild steps), built in the background while the first suites run (the
# unit suite needs none of them, the integration run on Debian's engine only
# crictl, the first one built). Its session is a scheduling group of its own
# (autogroup; see start_daemon), so the builds get about half the cores
# against the suites whatever their nice value: on a fresh machine that
# keeps them ahead of the suites that need them (no suite waited more than
# 12 s in the fresh run of 4f66e25).
# Each suite still calls the install scripts it needs, which wait for a
# build in progress (tool_lock) and then find the tool in place.
PREBUILD_PID=""
start_prebuild() {
  local steps=("$@")
  ((${#steps[@]} > 0)) || return 0
  log "building ${steps[*]} in the background (log: $ENV_LOG_DIR/prebuild.log)"
  mkdir -p "$ENV_LOG_DIR"
  # Its own process group, so that an early exit stops the whole build.
  setsid nice -n 19 bash "$CRIDOCK_REPO_ROOT/scripts/env/prebuild-tools.sh" "${steps[@]}" \
    </dev/null >"$ENV_LOG_DIR/prebuild.log" 2>&1 &
  PREBUILD_PID=$!
}

stop_prebuild() {
  running_job "$PREBUILD_PID" || return 0
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
