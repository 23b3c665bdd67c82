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
# resolves both on its PATH), one for containerd.service (the same PATH:
# the runc shim that runs a container is containerd's child and finds runc
# on containerd's PATH, as Docker CE's containerd.io finds the runc it
# ships), and daemon.json's containerd-snapshotter feature, merged into
# what the file holds. It is on the VM's disk, so a reboot keeps it.

# shellcheck shell=bash
# shellcheck disable=SC2034  # settings for the files node.sh sources

VM_ENGINE="${CRIDOCK_VM_ENGINE:-distro}"
VM_ENGINE_DIR=/usr/local/lib/cridock-test-engine
VM_ENGINE_DROPIN_NAME=cridock-test-engine.conf

check_engine() {
  case "$1" in
    distro | docker29 | docker29-containerd) ;;
    *) die "engine '$1': distro, docker29 or docker29-containerd wanted (CRIDOCK_VM_ENGINE)" ;;
  esac
}

# engine_daemon_json CURRENT SNAPSHOTTER: CURRENT (daemon.json's text, or
# nothing) with features.containerd-snapshotter set to SNAPSHOTTER (true
# or false), or without it (none: the release's own engine, with its own
# default). A file that is not a JSON object is an error, never replaced.
engine_daemon_json() {
  node -e '
    const [text, on] = process.argv.slice(1);
    let config;
    try {
      config = text.trim() === "" ? {} : JSON.parse(text);
    } catch {}
    if (typeof config !== "object" || config === null || Array.isArray(config)) {
      console.error("vm-node: daemon.json is not a JSON object");
      process.exit(1);
    }
    const { "containerd-snapshotter": _, ...features } = config.features ?? {};
    if (on !== "none") features["containerd-snapshotter"] = on === "true";
    if (Object.keys(features).length > 0) config.features = features;
    else delete config.features;
    process.stdout.write(JSON.stringify(config, null, 2) + "\n");
  ' "$1" "$2"
}

# write_engine_config NAME DROPIN SNAPSHOTTER: the guest's docker.service
# drop-in DROPIN and containerd.service's (its PATH line), none when DROPIN
# is empty, and daemon.json's image store (engine_daemon_json); then
# containerd and dockerd restarted on them.
write_engine_config() {
  local name="$1" dropin="$2" snapshotter="$3" current config
  current="$(vm_ssh "$name" "cat /etc/docker/daemon.json 2>/dev/null || true" </dev/null)" || die "VM $name: reading daemon.json failed"
  config="$(engine_daemon_json "$current" "$snapshotter")" || die "VM $name: /etc/docker/daemon.json is not a JSON object; left as it is"
  local docker=/etc/systemd/system/docker.service.d containerd=/etc/systemd/system/containerd.service.d
  local write_dropins="rm -f $docker/$VM_ENGINE_DROPIN_NAME $containerd/$VM_ENGINE_DROPIN_NAME"
  if [[ -n "$dropin" ]]; then
    write_dropins="mkdir -p $docker $containerd &&
      printf '%s\n' $(printf '%q' "$dropin") >$docker/$VM_ENGINE_DROPIN_NAME &&
      printf '%s\n' '[Service]' $(printf '%q' "$(grep '^Environment=PATH=' <<<"$dropin")") >$containerd/$VM_ENGINE_DROPIN_NAME"
  fi
  vm_ssh "$name" "mkdir -p /etc/docker && $write_dropins &&
    printf '%s' $(printf '%q' "$config") >/etc/docker/daemon.json.new && mv /etc/docker/daemon.json.new /etc/docker/daemon.json &&
    systemctl daemon-reload && systemctl stop docker.socket docker && systemctl restart containerd && systemctl start docker" </dev/null ||
    die "VM $name: restarting docker.service failed (journalctl -u docker in the guest)"
}

# switch_engine NAME ENGINE: NAME's dockerd becomes ENGINE, restarted with
# the node's containers stopped (a test node's, at its start), and checked:
# the server's version and image store are what ENGINE says.
switch_engine() {
  local name="$1" engine="$2" bin snapshotter want_driver
  check_engine "$engine"
  if [[ "$engine" == distro ]]; then
    write_engine_config "$name" "" none
    vm_log "VM $name: the release's own dockerd ($(vm_ssh "$name" "docker version --format '{{.Server.Version}}'" </dev/null || echo '?'))"
    return 0
  fi
  bin="$(bash "$(dirname "${BASH_SOURCE[0]}")/../env/install-docker-engine.sh")" || die "building Docker Engine for VM $name failed"
  snapshotter=false want_driver=overlay2
  if [[ "$engine" == docker29-containerd ]]; then snapshotter=true want_driver=overlayfs; fi
  vm_log "VM $name: Docker Engine from $bin (containerd image store: $snapshotter)"
  cmd_copy "$name" "$bin" "$VM_ENGINE_DIR"
  write_engine_config "$name" "[Service]
Environment=PATH=$VM_ENGINE_DIR:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ExecStart=
ExecStart=$VM_ENGINE_DIR/dockerd -H fd:// --containerd=/run/containerd/containerd.sock" "$snapshotter"
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
