#!/usr/bin/env bash
# Sets this machine up (scripts/env-setup.sh), makes sure crictl is there,
# installs a default CNI network when /etc/cni/net.d holds none, and runs
# cridock in the foreground on its default socket, /var/run/cridock.sock.
# Extra arguments are passed to cridock (see `node bin/cridock.js --help`).
#
# Then, from another shell:  crictl --runtime-endpoint unix:///var/run/cridock.sock info
set -euo pipefail

# shellcheck source=scripts/lib/env-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/env-common.sh"

CNI_CONF_DIR="/etc/cni/net.d"
CRICTL_LINK="/usr/local/bin/crictl"

# crictl on PATH: a link to the built one, unless some crictl is already there.
ensure_crictl() {
  [[ -x "$CRIDOCK_TOOLS_DIR/bin/crictl" ]] || bash "$CRIDOCK_REPO_ROOT/scripts/install-cri-tools.sh"
  if ! command -v crictl >/dev/null && [[ ! -e "$CRICTL_LINK" ]]; then
    ln -s "$CRIDOCK_TOOLS_DIR/bin/crictl" "$CRICTL_LINK"
    echo "$CRICTL_LINK" >"$ENV_STATE_DIR/crictl-link-installed"
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

main() {
  require_root
  bash "$CRIDOCK_REPO_ROOT/scripts/env-setup.sh"
  ensure_node_modules
  ensure_crictl
  ensure_default_cni_conf
  cd "$CRIDOCK_REPO_ROOT"
  log "starting cridock on unix:///var/run/cridock.sock (Ctrl-C stops it)"
  # As the systemd unit does: file operations get 16 libuv threads, not 4 (read at node's start).
  UV_THREADPOOL_SIZE="${UV_THREADPOOL_SIZE:-16}" exec node bin/cridock.js "$@"
}

main "$@"
