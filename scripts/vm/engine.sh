# The cgroup v2 test node's Docker engine: the guest's own (Debian's
# docker.io, what the image has) or the test environment's Engine 29
# (scripts/env/install-docker-engine.sh's static dockerd, docker-proxy and
# runc) with either image store, in place of docker.io's dockerd on the
# guest's containerd. That is the pairing of a node installed from Docker
# CE today: a current engine on cgroup v2 with the systemd cgroup driver.
# Sourced by scripts/vm/node.sh, after scripts/env/common.sh, image.sh and
# lifecycle.sh (vm_ssh, cmd_copy).
#
# Engines (CRIDOCK_VM_ENGINE, or `vm/node.sh engine NAME ENGINE`):
#   distro               the guest's docker.io as installed (the default)
#   docker29             Engine 29 with the graph driver store (overlay2),
#                        what an engine upgraded in place keeps
#   docker29-containerd  Engine 29 with the containerd image store, what
#                        a fresh install of Docker CE 29 uses
#
# The switch is a systemd drop-in for docker.service (ExecStart and a PATH
# that finds the engine's own runc and docker-proxy first, as dockerd
# resolves both on its PATH) and daemon.json's containerd-snapshotter
# feature, merged into what the file holds. It is on the VM's disk, so a
# reboot keeps it.

# shellcheck shell=bash
# shellcheck disable=SC2034  # settings for the files node.sh sources

VM_ENGINE="${CRIDOCK_VM_ENGINE:-distro}"
VM_ENGINE_DIR=/usr/local/lib/cridock-test-engine
VM_ENGINE_DROPIN=/etc/systemd/system/docker.service.d/cridock-test-engine.conf

check_engine() {
  case "$1" in
    distro | docker29 | docker29-containerd) ;;
    *) die "engine '$1': distro, docker29 or docker29-containerd wanted (CRIDOCK_VM_ENGINE)" ;;
  esac
}

# engine_daemon_json CURRENT SNAPSHOTTER: CURRENT (daemon.json's text, or
# nothing) with features.containerd-snapshotter set to SNAPSHOTTER (true
# or false). A file that is not a JSON object is an error, never replaced.
engine_daemon_json() {
  node -e '
    const [text, on] = process.argv.slice(1);
    const config = text.trim() === "" ? {} : JSON.parse(text);
    if (typeof config !== "object" || config === null || Array.isArray(config)) throw new Error("daemon.json is not a JSON object");
    config.features = { ...(config.features ?? {}), "containerd-snapshotter": on === "true" };
    process.stdout.write(JSON.stringify(config, null, 2) + "\n");
  ' "$1" "$2"
}

# switch_engine NAME ENGINE: NAME's dockerd becomes ENGINE, restarted with
# the node's containers stopped (a test node's, at its start), and checked:
# the server's version and image store are what ENGINE says.
switch_engine() {
  local name="$1" engine="$2" bin current config snapshotter want_driver
  check_engine "$engine"
  if [[ "$engine" == distro ]]; then
    vm_ssh "$name" "rm -f $VM_ENGINE_DROPIN && systemctl daemon-reload && systemctl restart docker" </dev/null ||
      die "VM $name: putting docker.io's dockerd back failed"
    return 0
  fi
  bin="$(bash "$(dirname "${BASH_SOURCE[0]}")/../env/install-docker-engine.sh")" || die "building Docker Engine for VM $name failed"
  snapshotter=false want_driver=overlay2
  if [[ "$engine" == docker29-containerd ]]; then snapshotter=true want_driver=overlayfs; fi
  vm_log "VM $name: Docker Engine from $bin (containerd image store: $snapshotter)"
  cmd_copy "$name" "$bin" "$VM_ENGINE_DIR"
  current="$(vm_ssh "$name" "cat /etc/docker/daemon.json 2>/dev/null || true" </dev/null)" || die "VM $name: reading daemon.json failed"
  config="$(engine_daemon_json "$current" "$snapshotter")" || die "VM $name: /etc/docker/daemon.json is not a JSON object; left as it is"
  local dropin="[Service]
Environment=PATH=$VM_ENGINE_DIR:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ExecStart=
ExecStart=$VM_ENGINE_DIR/dockerd -H fd:// --containerd=/run/containerd/containerd.sock"
  vm_ssh "$name" "mkdir -p /etc/docker $(dirname "$VM_ENGINE_DROPIN") &&
    printf '%s\n' $(printf '%q' "$dropin") >$VM_ENGINE_DROPIN &&
    printf '%s' $(printf '%q' "$config") >/etc/docker/daemon.json.new && mv /etc/docker/daemon.json.new /etc/docker/daemon.json &&
    systemctl daemon-reload && systemctl restart docker" </dev/null ||
    die "VM $name: restarting docker.service on Docker Engine failed (journalctl -u docker in the guest)"
  local version="" driver=""
  # dockerd's first start on an empty data root takes an emulated minute or more.
  for _ in $(seq 1 60); do
    read -r version driver < <(vm_ssh "$name" "docker info --format '{{.ServerVersion}} {{.Driver}}' 2>/dev/null" </dev/null || true) || true
    [[ -z "$version" ]] || break
    sleep 5
  done
  [[ "$version" == 29.* ]] || die "VM $name: dockerd is '${version:-not answering}' after the switch, not Engine 29"
  [[ "$driver" == "$want_driver" ]] || die "VM $name: Engine $version uses storage driver '$driver', not $want_driver"
  vm_log "VM $name: Docker Engine $version, storage driver $driver, runc $(vm_ssh "$name" "$VM_ENGINE_DIR/runc --version | head -n1" </dev/null || echo '?')"
}
