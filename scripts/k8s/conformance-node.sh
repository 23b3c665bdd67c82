# The node conformance suite's own setup (sourced by scripts/k8s-conformance.sh
# after env/common.sh): a private dockerd (the Engine 29 build) and a private
# cridock on it, both in a /docker-daemon cgroup, for e2e_node.test to run its
# kubelet against.
#
# e2e_node.test runs kubelet with systemd-run when it finds it on the PATH.
# systemd is not PID 1 here, so the suite runs with a PATH that lacks it (a
# directory of links to every other command, see node_suite_path). Without
# systemd it runs kubelet with `--runtime-cgroups=/docker-daemon` and
# kubeletCgroups /kubelet, and expects the runtime's processes in that cgroup
# (the Summary API spec reads its stats).
#
# It takes, beside the cluster (scripts/k8s/cluster-common.sh) and the test
# suites: kubelet's fixed /var/lib/kubelet and ports 10250, 10255 and 10248
# (so never while the cluster is up), bridges cridock-ne0 (dockerd's) and
# cridock-ne1 (pods'), the pod subnet 10.114.0.0/24.

# shellcheck shell=bash
# shellcheck disable=SC2034  # constants for the scripts that source this file

NODE_SUITE_STATE_DIR="/var/lib/cridock-node-e2e"
NODE_SUITE_RUN_DIR="/run/cridock-node-e2e"
NODE_SUITE_DOCKER_SOCKET="$NODE_SUITE_RUN_DIR/docker.sock"
NODE_SUITE_CRI_SOCKET="$NODE_SUITE_RUN_DIR/cridock.sock"
NODE_SUITE_DOCKER_BRIDGE="cridock-ne0"
NODE_SUITE_CNI_BRIDGE="cridock-ne1"
NODE_SUITE_POD_SUBNET="10.114.0.0/24"
NODE_SUITE_CGROUP="docker-daemon"
# kubelet's own cgroup, as the suite configures it without systemd.
NODE_SUITE_KUBELET_CGROUP="kubelet"
NODE_SUITE_DAEMONS=(node-e2e-dockerd node-e2e-cridock)
# The RuntimeClass handler the suites expect every node to have
# (e2eruntimeclass.PreconfiguredRuntimeClassHandler): one more name for runc.
NODE_SUITE_RUNTIME_HANDLER="test-handler"
# What e2e_node.test's kubelet uses at fixed paths.
NODE_SUITE_KUBELET_ROOT="/var/lib/kubelet"

node_socket_answers() {
  [[ -S "$1" ]] && curl -sf --max-time 2 --unix-socket "$1" http://docker/_ping >/dev/null
}

node_cri_answers() {
  "$CRIDOCK_TOOLS_DIR/bin/crictl" --runtime-endpoint "unix://$NODE_SUITE_CRI_SOCKET" --timeout 2s version >/dev/null 2>&1
}

# node_cgroup_dirs NAME: the directories of cgroup /NAME a process joins, in
# every cgroup v1 hierarchy (cpuset would need its cpus and mems copied
# first, and nothing reads a system container's cpuset) or in the v2 one.
node_cgroup_dirs() {
  local name="$1" controller
  for controller in cpu,cpuacct cpu cpuacct memory pids blkio devices freezer systemd; do
    [[ -d "/sys/fs/cgroup/$controller" && ! -L "/sys/fs/cgroup/$controller" ]] && echo "/sys/fs/cgroup/$controller/$name"
  done
  [[ "$(stat -fc %T /sys/fs/cgroup)" == cgroup2fs ]] && echo "/sys/fs/cgroup/$name"
  return 0
}

# in_cgroup NAME COMMAND...: runs COMMAND (exec) once this shell has joined /NAME.
in_cgroup() {
  local name="$1" dir
  shift
  while read -r dir; do
    mkdir -p "$dir"
    echo "$BASHPID" >"$dir/cgroup.procs"
  done < <(node_cgroup_dirs "$name")
  exec "$@"
}

# The command line of bash that runs its arguments in /NAME (for start_daemon).
in_cgroup_command() {
  echo "$(declare -f node_cgroup_dirs in_cgroup); in_cgroup $1 \"\$@\""
}

# node_kubelet_bin_dir DIR: DIR as the directory e2e_node.test takes kubelet from (its own), whose kubelet
# starts in /kubelet, the suite's KubeletCgroups (services/kubelet.go without
# systemd). kubelet would move itself there, but it first compares its pid
# namespace with PID 1's, which this host does not let it read ("Failed to
# ensure state ... failed to find pid namespace of init process"), and the
# Summary API spec then misses the kubelet system container.
node_kubelet_bin_dir() {
  local dir="$1" name
  mkdir -p "$dir"
  for name in "$KUBERNETES_BIN_DIR"/*; do
    [[ "${name##*/}" == kubelet ]] || ln -sfn "$name" "$dir/${name##*/}"
  done
  {
    echo '#!/usr/bin/env bash'
    echo "# kubelet of the node conformance suite, started in /$NODE_SUITE_KUBELET_CGROUP (scripts/k8s/conformance-node.sh)."
    echo "$(declare -f node_cgroup_dirs in_cgroup)"
    echo "in_cgroup $NODE_SUITE_KUBELET_CGROUP $(printf '%q' "$KUBERNETES_BIN_DIR/kubelet") \"\$@\""
  } >"$dir/kubelet"
  chmod 0755 "$dir/kubelet"
  echo "$dir"
}

# The runtime's cgroup, and the kubepods and kubelet hierarchies the suite's
# kubelet made under cgroupRoot / in every hierarchy (deepest first; a cgroup
# still in use stays).
remove_runtime_cgroups() {
  local root sub
  for root in /sys/fs/cgroup /sys/fs/cgroup/*; do
    [[ -d "$root" && ! -L "$root" ]] || continue
    for sub in "$root/$NODE_SUITE_CGROUP" "$root/kubepods" "$root/$NODE_SUITE_KUBELET_CGROUP"; do
      [[ -f "$sub/cgroup.procs" ]] || continue
      find "$sub" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
  done
}

start_node_dockerd() {
  local bin
  bin="$(bash "$CRIDOCK_REPO_ROOT/scripts/env/install-docker-engine.sh")"
  mkdir -p "$NODE_SUITE_RUN_DIR" "$NODE_SUITE_STATE_DIR/docker"
  ip link show "$NODE_SUITE_DOCKER_BRIDGE" >/dev/null 2>&1 || ip link add "$NODE_SUITE_DOCKER_BRIDGE" type bridge
  log "starting the node suite's dockerd (Engine $DOCKER_ENGINE_VERSION) on $NODE_SUITE_DOCKER_SOCKET in /$NODE_SUITE_CGROUP"
  # The images come from the TLS mirror like any pull; nothing is preloaded.
  private_dockerd_command "$bin" "$NODE_SUITE_DOCKER_SOCKET" "$NODE_SUITE_STATE_DIR" "$NODE_SUITE_RUN_DIR" "$NODE_SUITE_DOCKER_BRIDGE" cridock-node-e2e
  # The runtime handler the RuntimeClass specs name.
  start_daemon node-e2e-dockerd bash -c "$(in_cgroup_command "$NODE_SUITE_CGROUP")" in-cgroup \
    "${DOCKERD_COMMAND[@]}" --add-runtime="$NODE_SUITE_RUNTIME_HANDLER=$bin/runc"
  wait_until 60 node_socket_answers "$NODE_SUITE_DOCKER_SOCKET" ||
    die "the node suite's dockerd did not answer within 60 s; see $ENV_LOG_DIR/node-e2e-dockerd.log"
}

write_node_cni_config() {
  local dir="$NODE_SUITE_STATE_DIR/cni"
  mkdir -p "$dir/net.d" "$dir/ipam"
  cat >"$dir/net.d/10-node-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "cridock-node-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_SUITE_CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/ipam",
        "ranges": [[{ "subnet": "$NODE_SUITE_POD_SUBNET" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "firewall" },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
  echo '{ "cniVersion": "1.0.0", "name": "lo", "type": "loopback" }' >"$dir/net.d/99-loopback.conf"
}

# The node's CRI runtime: cridock, or with CRIDOCK_NODE_SUITE_CRI_DOCKERD set
# to a cri-dockerd binary (built outside the repository), that instead, with
# the same socket, engine, network and pause image, for the node performance
# specs' comparison (scripts/bench/node-perf.sh). Either shares
# /$NODE_SUITE_CGROUP with dockerd, so the specs' "runtime" is the two together.
start_node_cridock() {
  write_node_cni_config
  local cni_dir="$NODE_SUITE_STATE_DIR/cni/net.d" name=cridock
  if [[ -n "${CRIDOCK_NODE_SUITE_CRI_DOCKERD:-}" ]]; then
    [[ -x "$CRIDOCK_NODE_SUITE_CRI_DOCKERD" ]] || die "CRIDOCK_NODE_SUITE_CRI_DOCKERD: $CRIDOCK_NODE_SUITE_CRI_DOCKERD is not an executable"
    name=cri-dockerd
    CRIDOCK_COMMAND=("$CRIDOCK_NODE_SUITE_CRI_DOCKERD"
      --container-runtime-endpoint="unix://$NODE_SUITE_CRI_SOCKET"
      --docker-endpoint="unix://$NODE_SUITE_DOCKER_SOCKET"
      --pod-infra-container-image="registry.k8s.io/pause:$KUBEADM_PAUSE_VERSION"
      --cri-dockerd-root-directory="$NODE_SUITE_STATE_DIR/cri-dockerd"
      # Debian's CNI plugins, which cridock finds by itself; cri-dockerd looks in /opt/cni/bin alone.
      --network-plugin=cni --cni-bin-dir=/usr/lib/cni --cni-conf-dir="$cni_dir" --cni-cache-dir="$NODE_SUITE_STATE_DIR/cni/cache"
      --streaming-bind-addr=127.0.0.1)
  else
    cridock_command "$NODE_SUITE_STATE_DIR" "$NODE_SUITE_CRI_SOCKET" "$NODE_SUITE_DOCKER_SOCKET" "$cni_dir"
  fi
  log "starting $name on $NODE_SUITE_CRI_SOCKET in /$NODE_SUITE_CGROUP"
  start_daemon node-e2e-cridock bash -c "$(in_cgroup_command "$NODE_SUITE_CGROUP")" in-cgroup "${CRIDOCK_COMMAND[@]}"
  wait_until 60 node_cri_answers || die "$name did not answer within 60 s; see $ENV_LOG_DIR/node-e2e-cridock.log"
}

# node_suite_path DIR: DIR filled with a link to every command on this PATH
# but systemd-run and systemctl, printed as the PATH the suite runs with.
node_suite_path() {
  local dir="$1" entry name
  mkdir -p "$dir"
  local IFS=:
  for entry in $PATH; do
    [[ -d "$entry" ]] || continue
    for name in "$entry"/*; do
      [[ -x "$name" && ! -d "$name" ]] || continue
      case "${name##*/}" in systemd-run | systemctl) continue ;; esac
      [[ -e "$dir/${name##*/}" || -L "$dir/${name##*/}" ]] || ln -s "$name" "$dir/${name##*/}"
    done
  done
  echo "$dir"
}

# The base KubeletConfiguration the suite gets (--kubelet-config-file): its
# own defaults (services/kubelet.go) with failCgroupV1 off for this cgroup v1
# host and the driver dockerd uses.
write_node_kubelet_config() {
  cat >"$1" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /
volumeStatsAggPeriod: 10s
serializeImagePulls: false
fileCheckFrequency: 10s
podCIDR: 10.100.0.0/24
evictionPressureTransitionPeriod: 30s
evictionHard:
  memory.available: 250Mi
  nodefs.available: 10%
  nodefs.inodesFree: 5%
evictionMinimumReclaim:
  nodefs.available: 5%
  nodefs.inodesFree: 5%
EOF
}

# Every container of the node suite's dockerd, removed (kubelet is gone by now).
remove_node_containers() {
  node_socket_answers "$NODE_SUITE_DOCKER_SOCKET" || return 0
  local ids
  ids="$(DOCKER_HOST="unix://$NODE_SUITE_DOCKER_SOCKET" docker ps -aq 2>/dev/null)" || return 0
  [[ -z "$ids" ]] || DOCKER_HOST="unix://$NODE_SUITE_DOCKER_SOCKET" docker rm -f $ids >/dev/null 2>&1 || true
}

node_suite_down() {
  remove_node_containers
  stop_daemon node-e2e-cridock 30
  stop_daemon node-e2e-dockerd 60
  unmount_beneath "$NODE_SUITE_KUBELET_ROOT"
  unmount_beneath "$NODE_SUITE_RUN_DIR"
  unmount_beneath "$NODE_SUITE_STATE_DIR"
  local bridge
  for bridge in "$NODE_SUITE_CNI_BRIDGE" "$NODE_SUITE_DOCKER_BRIDGE"; do
    ip link show "$bridge" >/dev/null 2>&1 && ip link delete "$bridge" type bridge
  done
  remove_runtime_cgroups
  rm -rf "$NODE_SUITE_RUN_DIR" "$NODE_SUITE_STATE_DIR"
}
