#!/usr/bin/env bash
# Sets up what running cridock needs and nothing more: the Debian packages
# of the engine, CNI plugins and the tools cridock calls (RUN_PACKAGES in
# scripts/env/common.sh), dockerd when none answers, crictl (built in the
# background when missing: cridock does not wait for it), and a default
# CNI network when /etc/cni/net.d holds none. Then it runs cridock in the
# foreground on its default socket, /var/run/cridock.sock: the self-contained
# executable (dist/cridock-linux-x64, npm run build:binary) when it is there
# and current, else the bundle (dist/cridock.js, built here when missing or
# older than the sources) on the Node the executable embeds
# (scripts/build/node-runtime.json, fetched into the tools cache once), never
# the sources and never on the machine's own node. The test environment (critest,
# registries, the TLS mirror, test images, kubelet) is scripts/test.sh's.
# Extra arguments are passed to cridock (see `dist/cridock-linux-x64 --help`).
#
# Then, from another shell:  crictl --runtime-endpoint unix:///var/run/cridock.sock info
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/env/common.sh"

CNI_CONF_DIR="/etc/cni/net.d"

# crictl is built with Go, which takes minutes on a cold build cache, and
# cridock does not need it to serve: a missing crictl is built in the
# background (a session of its own, so stopping cridock does not cut the
# build short) while cridock starts, and linked into /usr/local/bin once it
# is there, unless some crictl is on the PATH already.
ensure_crictl() {
  local tools="$CRIDOCK_REPO_ROOT/scripts/env/install-cri-tools.sh"
  if bash "$tools" --check crictl; then
    bash "$tools" --link crictl
  elif pid_of crictl-build >/dev/null; then
    log "crictl is still being built in the background (log: $ENV_LOG_DIR/crictl-build.log)"
  else
    log "building crictl in the background (log: $ENV_LOG_DIR/crictl-build.log); cridock serves meanwhile"
    start_daemon crictl-build bash "$tools" --link crictl
  fi
}

# A bridge network (cni0, 10.88.0.0/16, with host ports) and loopback, only
# where no CNI config exists: an existing network is the operator's choice.
ensure_default_cni_conf() {
  if [[ ! -d "$CNI_CONF_DIR" ]]; then
    mkdir -p "$CNI_CONF_DIR"
    echo "$CNI_CONF_DIR" >"$ENV_STATE_DIR/cni-conf-dir-created"
  fi
  if [[ -n "$(find "$CNI_CONF_DIR" -maxdepth 1 -type f \( -name '*.conf' -o -name '*.conflist' -o -name '*.json' \) -print -quit)" ]]; then
    return 0
  fi
  local file
  : >"$DEFAULT_CNI_STAMP"
  for file in "$CRIDOCK_REPO_ROOT"/scripts/cni/*; do
    install -m 0644 "$file" "$CNI_CONF_DIR/$(basename "$file")"
    echo "$CNI_CONF_DIR/$(basename "$file")" >>"$DEFAULT_CNI_STAMP"
  done
  log "installed the default CNI network (bridge $DEFAULT_CNI_BRIDGE, 10.88.0.0/16) in $CNI_CONF_DIR"
}

# current FILE: FILE exists and no source it is built from is newer.
current() {
  [[ -e "$1" ]] && [[ -z "$(find "$CRIDOCK_REPO_ROOT/src" "$CRIDOCK_REPO_ROOT/proto" "$CRIDOCK_REPO_ROOT/package-lock.json" \
    "$CRIDOCK_REPO_ROOT/scripts/build/node-runtime.json" -newer "$1" -print -quit)" ]]
}

main() {
  require_root
  mkdir -p "$ENV_STATE_DIR" "$ENV_LOG_DIR" "$ENV_RUN_DIR"
  install_missing_packages "${RUN_PACKAGES[@]}"
  ensure_dockerd
  ensure_crictl
  ensure_default_cni_conf
  cd "$CRIDOCK_REPO_ROOT"
  # As the systemd unit does: file operations get 16 libuv threads, not 4 (read at node's start).
  export UV_THREADPOOL_SIZE="${UV_THREADPOOL_SIZE:-16}"
  if current dist/cridock-linux-x64; then
    log "starting dist/cridock-linux-x64 on unix:///var/run/cridock.sock (Ctrl-C stops it)"
    exec dist/cridock-linux-x64 "$@"
  fi
  ensure_node_modules
  # The bundle runs on the Node the package ships, not on the machine's (which may be out of support).
  use_pinned_node
  if ! current dist/cridock.js; then
    log "building the bundle dist/cridock.js"
    node_modules/.bin/tsx scripts/build/bundle.ts || die "building dist/cridock.js failed"
  fi
  log "starting dist/cridock.js on Node $("$CRIDOCK_NODE" --version) on unix:///var/run/cridock.sock (Ctrl-C stops it)"
  exec "$CRIDOCK_NODE" dist/cridock.js "$@"
}

main "$@"
