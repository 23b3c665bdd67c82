#!/usr/bin/env bash
# Starts (or stops) the Docker Engine 29 setups the tests run on beside the
# node's own dockerd: "docker29" with the classic image store and
# "docker29-containerd" with the containerd image store. Both use the
# binaries scripts/env/install-docker-engine.sh builds and Debian's containerd
# as their managed containerd.
#
# Each engine has its own socket, data root, exec root, pid file, bridge and
# containerd namespaces, and runs without iptables rules, NAT or IP
# forwarding changes, so the node's dockerd and docker0 are never touched
# (and never --bridge=none, which deletes docker0). Pods get their network
# from CNI; Docker's bridge only serves cridock's no-op network mode.
#
# start writes the CDI test device's spec (scripts/env/cdi.sh) before the
# engines start (stop removes it) and loads the test images (scripts/env/images/)
# into each engine; the registries on 127.0.0.1:5000/5001 are reachable from them as insecure
# registries, as dockerd treats 127.0.0.0/8 by default.
#
# Usage: env/test-engines.sh start|stop
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=scripts/env/cdi.sh
source "$(dirname "${BASH_SOURCE[0]}")/cdi.sh"

engine_answers() {
  local socket
  socket="$(test_engine_socket "$1")"
  [[ -S "$socket" ]] && curl -sf --max-time 2 --unix-socket "$socket" http://docker/_ping >/dev/null
}

ensure_bridge() {
  ip link show "$1" >/dev/null 2>&1 && return 0
  ip link add "$1" type bridge
}

start_engine() {
  local name="$1" bin="$2" run="$ENV_RUN_DIR/$1"
  if engine_answers "$name"; then
    return 0
  fi
  if ! pid_of "$name" >/dev/null; then
    mkdir -p "$run" "$ENV_STATE_DIR/$name"
    ensure_bridge "${TEST_ENGINE_BRIDGE[$name]}"
    log "starting Docker Engine $DOCKER_ENGINE_VERSION as $name (log: $ENV_LOG_DIR/$name.log)"
    # PATH puts this engine's runc and docker-proxy first (containerd's shim
    # finds runc on it); containerd itself is Debian's.
    start_daemon "$name" env PATH="$bin:$PATH" "$bin/dockerd" \
      --host="$(test_engine_endpoint "$name")" \
      --data-root="$ENV_STATE_DIR/$name" \
      --exec-root="$run/exec" \
      --pidfile="$run/dockerd.pid" \
      --bridge="${TEST_ENGINE_BRIDGE[$name]}" \
      --iptables=false --ip6tables=false --ip-masq=false --ip-forward=false \
      --userland-proxy-path="$bin/docker-proxy" \
      --containerd-namespace="cridock-$name" \
      --containerd-plugins-namespace="cridock-$name-plugins" \
      --feature "containerd-snapshotter=${TEST_ENGINE_SNAPSHOTTER[$name]}"
  fi
  wait_until 90 engine_answers "$name" || die "$name did not answer on $(test_engine_socket "$name") within 90s; see $ENV_LOG_DIR/$name.log"
}

load_images() {
  local name="$1"
  (cd "$CRIDOCK_REPO_ROOT" && CRIDOCK_TEST_DOCKER_ENDPOINT="$(test_engine_endpoint "$name")" \
    node_modules/.bin/tsx scripts/env/images/build.ts --state-dir "$ENV_STATE_DIR" --load-only) 2>>"$ENV_LOG_DIR/images.log" ||
    die "loading the test images into $name failed; see $ENV_LOG_DIR/images.log"
}

stop_engine() {
  local name="$1"
  stop_daemon "$name" 60
  # dockerd unmounts its exec root, and the bind mount of its data root onto
  # itself, on a clean stop; what a killed one left is unmounted here (else
  # teardown --purge cannot remove the data root: "Device or resource busy").
  local run="$ENV_RUN_DIR/$name" data="$ENV_STATE_DIR/$name" dir
  for dir in "$run" "$data"; do
    [[ -d "$dir" ]] || continue
    unmount_beneath "$dir"
    # The directory itself, as often as something is mounted on it.
    while mountpoint -q "$dir" && umount -l "$dir" 2>/dev/null; do :; done
  done
  [[ -d "$run" ]] && rm -rf "$run"
  local bridge="${TEST_ENGINE_BRIDGE[$name]}"
  delete_bridge "$bridge"
}

main() {
  require_root
  mkdir -p "$ENV_STATE_DIR" "$ENV_LOG_DIR" "$ENV_RUN_DIR"
  local name bin
  case "${1:-}" in
    start)
      bin="$(bash "$CRIDOCK_REPO_ROOT/scripts/env/install-docker-engine.sh")"
      ensure_cdi_test_device
      for name in "${TEST_ENGINES[@]}"; do
        start_engine "$name" "$bin"
        load_images "$name"
      done
      ;;
    stop)
      for name in "${TEST_ENGINES[@]}"; do stop_engine "$name"; done
      remove_cdi_test_device
      ;;
    *) die "usage: env/test-engines.sh start|stop" ;;
  esac
}

main "$@"
