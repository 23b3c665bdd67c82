# The second node of scripts/cluster.sh (`up --nodes 2`), on this same
# machine (sourced after cluster-common.sh and cluster-config.sh).
#
# It is a worker joined with `kubeadm join` and a bootstrap token, with its
# own Engine 29 dockerd, its own cridock and its own kubelet, all in:
#   - a network namespace of its own ($NODE2_NETNS), linked to the host (the
#     first node) by a veth pair on $NODE2_LINK_SUBNET; the host routes the
#     second node's pod CIDR to it, and the second node's default route is
#     the host, so pods reach each other across the nodes without NAT;
#   - a mount namespace of its own, where the paths kubeadm and kubelet fix
#     (/etc/kubernetes, /var/lib/kubelet, the pod log directories) are bind
#     mounts of its own directories, and /sys is its network namespace's.
# Everything else (the tools, the CNI plugins, /etc/hosts, the registry CA
# under /etc/docker/certs.d) is the host's. The test registries listen on the
# host's loopback only, so a pair of socat processes per port carries the
# second node's 127.0.0.1:<port> to the host's, through a unix socket (a file
# both namespaces see).
#
# Its kubelet takes the cluster's KubeletConfiguration (kubeadm join
# downloads it) plus its own flags: its node IP, and its own cgroup root, so
# its pods' cgroups never mix with the first node's on this cgroup v1 host.

# shellcheck shell=bash
# shellcheck disable=SC2034  # constants for the scripts that source this file

NODE2_NAME="$CLUSTER_NODE_NAME-2"
NODE2_NETNS="cridock-node2"
NODE2_STATE_DIR="/var/lib/cridock-node2"
NODE2_RUN_DIR="/run/cridock-node2"
# The mount namespace is kept by a bind mount of its /proc file on a file in
# a private mount (a namespace file may not be bound under a shared one).
NODE2_NS_DIR="$NODE2_RUN_DIR/ns"
NODE2_MOUNT_NS="$NODE2_NS_DIR/mnt"
NODE2_DOCKER_SOCKET="$NODE2_RUN_DIR/docker.sock"
NODE2_CRI_SOCKET="$NODE2_RUN_DIR/cridock.sock"
NODE2_CNI_CONF_DIR="$NODE2_STATE_DIR/cni/net.d"
NODE2_JOIN_CONFIG="$NODE2_STATE_DIR/kubeadm-join.yaml"
NODE2_KUBEADM_LOG="$ENV_LOG_DIR/cluster-node2-kubeadm.log"
# The veth pair: the host's end and the node's end (inside its namespace).
NODE2_LINK_HOST="cridock-n2h"
NODE2_LINK_NODE="eth0"
NODE2_LINK_SUBNET="10.115.0.0/30"
NODE2_HOST_ADDR="10.115.0.1"
NODE2_ADDR="10.115.0.2"
# Below every v1 hierarchy's root: kubelet's --cgroup-root for this node.
NODE2_CGROUP_ROOT="/cridock-node2"
# The host loopback ports the second node reaches through socat: the TLS
# mirror (registry.k8s.io and the others in /etc/hosts), the registry and
# the auth registry.
NODE2_FORWARDED_PORTS=(443 5000 5001)
NODE2_DAEMONS=(cluster-node2-dockerd cluster-node2-cridock cluster-node2-kubelet)
# Host paths that kubeadm or kubelet fix, each bound in the node's mount
# namespace to $NODE2_STATE_DIR/root/<path>. The first node's podLogsDir is in
# the cluster's KubeletConfiguration, which the second node's kubelet takes
# too; a kubelet removes the log directories of pods it does not know.
# kubeadm reset on a worker clears /var/lib/etcd (it knows no other data
# directory there), so the node has its own, empty one.
NODE2_PRIVATE_PATHS=(/etc/kubernetes /var/lib/kubelet /var/lib/etcd /var/log/pods /var/log/containers "$CLUSTER_STATE_DIR/pod-logs")
# Host files and directories node2_up found missing and made, one a line.
NODE2_CREATED_STAMP="$NODE2_STATE_DIR/created"
# A comment on every iptables rule node2_up adds to the host, for down.
NODE2_RULE_COMMENT="cridock cluster node 2"

# shellcheck source=scripts/k8s/cluster-node2-ns.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster-node2-ns.sh"

# A command prefix that runs what follows in the second node's network and
# mount namespaces (nsenter execs it: a daemon's recorded pid is its own).
NODE2_NSENTER=(nsenter --mount="$NODE2_MOUNT_NS" --net="/run/netns/$NODE2_NETNS" --)
node2_in() { "${NODE2_NSENTER[@]}" "$@"; }

node2_kubectl() { cluster_kubectl "$@"; }

node2_netns_exists() { [[ -e "/run/netns/$NODE2_NETNS" ]]; }

node2_mount_ns_exists() {
  awk -v f="$NODE2_MOUNT_NS" '$2 == f { found = 1 } END { exit !found }' /proc/self/mounts
}

node2_docker_answers() {
  [[ -S "$NODE2_DOCKER_SOCKET" ]] && curl -sf --max-time 2 --unix-socket "$NODE2_DOCKER_SOCKET" http://docker/_ping >/dev/null
}

node2_cri_answers() {
  "$CRIDOCK_TOOLS_DIR/bin/crictl" --runtime-endpoint "unix://$NODE2_CRI_SOCKET" --timeout 2s version >/dev/null 2>&1
}

node2_ready() {
  [[ "$(node2_kubectl get node "$NODE2_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

# node2_make_dir PATH: mkdir -p, recording each directory it makes, outermost
# first (down removes them innermost first, each only if empty).
node2_make_dir() {
  local path="$1" missing=()
  while [[ ! -e "$path" ]]; do
    missing=("$path" "${missing[@]}")
    path="$(dirname "$path")"
  done
  ((${#missing[@]} == 0)) && return 0
  mkdir -p "$NODE2_STATE_DIR"
  printf '%s\n' "${missing[@]}" >>"$NODE2_CREATED_STAMP"
  mkdir -p "$1"
}

# --- daemons -------------------------------------------------------------------

node2_start_dockerd() {
  local bin
  bin="$(bash "$CRIDOCK_REPO_ROOT/scripts/env/install-docker-engine.sh")"
  node2_docker_answers && return 0
  mkdir -p "$NODE2_STATE_DIR/docker"
  log "starting node 2's dockerd (Engine $DOCKER_ENGINE_VERSION) on $NODE2_DOCKER_SOCKET"
  # Inside node 2's namespaces, its bridge has the first node's bridge's name.
  private_dockerd_command "$bin" "$NODE2_DOCKER_SOCKET" "$NODE2_STATE_DIR" "$NODE2_RUN_DIR" "$CLUSTER_DOCKER_BRIDGE" cridock-node2
  start_daemon cluster-node2-dockerd "${NODE2_NSENTER[@]}" "${DOCKERD_COMMAND[@]}"
  wait_until 60 node2_docker_answers ||
    die "node 2's dockerd did not answer within 60 s; see $ENV_LOG_DIR/cluster-node2-dockerd.log"
}

# The same CNI configuration as the first node's (write_cni_config), with the
# node's own directories; its bridge has the same name, in its namespace.
node2_start_cridock() {
  node2_cri_answers && return 0
  (CLUSTER_STATE_DIR="$NODE2_STATE_DIR" CLUSTER_CNI_CONF_DIR="$NODE2_CNI_CONF_DIR" write_cni_config)
  log "starting node 2's cridock on $NODE2_CRI_SOCKET"
  cridock_command "$NODE2_STATE_DIR" "$NODE2_CRI_SOCKET" "$NODE2_DOCKER_SOCKET" "$NODE2_CNI_CONF_DIR"
  start_daemon cluster-node2-cridock "${NODE2_NSENTER[@]}" "${CRIDOCK_COMMAND[@]}"
  wait_until 60 node2_cri_answers || die "node 2's cridock did not answer within 60 s; see $ENV_LOG_DIR/cluster-node2-cridock.log"
}

# As start_cluster_kubelet: the command line of kubeadm's systemd drop-in,
# with the files kubeadm join wrote (in the node's mount namespace).
node2_start_kubelet() {
  kubelet_command "$NODE2_STATE_DIR/root/var/lib/kubelet/kubeadm-flags.env"
  log "starting node 2's kubelet: ${KUBELET_COMMAND[*]}"
  start_daemon cluster-node2-kubelet "${NODE2_NSENTER[@]}" "${KUBELET_COMMAND[@]}"
}

# --- join ------------------------------------------------------------------------

# node2_write_join_config HOST_IP: a JoinConfiguration with a fresh bootstrap
# token and the CA's public key hash, both from the first node's kubeadm.
node2_write_join_config() {
  local host_ip="$1" join token hash check ignored=""
  join="$("$KUBERNETES_BIN_DIR/kubeadm" token create --kubeconfig "$CLUSTER_KUBECONFIG" --ttl 30m \
    --description "cridock cluster node 2" --print-join-command 2>>"$NODE2_KUBEADM_LOG")" ||
    die "kubeadm token create failed; see $NODE2_KUBEADM_LOG"
  token="$(sed -n 's/.*--token \([a-z0-9.]*\).*/\1/p' <<<"$join")"
  hash="$(sed -n 's/.*--discovery-token-ca-cert-hash \(sha256:[0-9a-f]*\).*/\1/p' <<<"$join")"
  [[ -n "$token" && -n "$hash" ]] || die "kubeadm printed no token and CA hash: $join"
  for check in "${CLUSTER_IGNORED_PREFLIGHT[@]}"; do ignored+="    - $check"$'\n'; done
  mkdir -p "$NODE2_STATE_DIR"
  (
    umask 077
    cat >"$NODE2_JOIN_CONFIG" <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: $host_ip:$CLUSTER_API_PORT
    token: $token
    caCertHashes: [$hash]
nodeRegistration:
  name: $NODE2_NAME
  criSocket: unix://$NODE2_CRI_SOCKET
  imagePullPolicy: IfNotPresent
  kubeletExtraArgs:
    - name: node-ip
      value: $NODE2_ADDR
    - name: cgroup-root
      value: $NODE2_CGROUP_ROOT
  # A worker that runs workloads: the two-node specs want it untainted.
  taints: []
  ignorePreflightErrors:
$ignored
EOF
  )
}

# kubeadm join in the node's namespaces, in the background; its kubelet
# starts once kubeadm has written its files and said it could not start the
# kubelet service itself (as run_kubeadm_init does for the first node).
node2_run_kubeadm_join() {
  : >"$NODE2_KUBEADM_LOG.join"
  log "kubeadm join (log: $NODE2_KUBEADM_LOG)"
  local status=0
  kubeadm_starting_kubelet "$NODE2_KUBEADM_LOG.join" node2_start_kubelet \
    node2_in env PATH="$KUBERNETES_BIN_DIR:$PATH" "$KUBERNETES_BIN_DIR/kubeadm" join --config "$NODE2_JOIN_CONFIG" || status=$?
  cat "$NODE2_KUBEADM_LOG.join" >>"$NODE2_KUBEADM_LOG"
  rm -f "$NODE2_KUBEADM_LOG.join"
  ((status == 0)) || die "kubeadm join failed ($status); see $NODE2_KUBEADM_LOG and $ENV_LOG_DIR/cluster-node2-kubelet.log"
  ((KUBEADM_STARTED_KUBELET)) || die "kubeadm join never reached its kubelet-start phase; see $NODE2_KUBEADM_LOG"
}

node2_pod_cidr() {
  node2_kubectl get node "$NODE2_NAME" -o 'jsonpath={.spec.podCIDR}' 2>/dev/null | grep -E '^[0-9.]+/[0-9]+$'
}

# The host's route to the node's pod CIDR, once the controller manager has
# given it one; the node reaches the first node's pods by its default route.
node2_route_pods() {
  local cidr
  wait_until 120 node2_pod_cidr || die "node $NODE2_NAME got no pod CIDR within 2 minutes"
  cidr="$(node2_pod_cidr)"
  ip route replace "$cidr" via "$NODE2_ADDR" dev "$NODE2_LINK_HOST"
  log "node 2's pods ($cidr) are routed through $NODE2_LINK_HOST"
}

# A pod of the kube-proxy DaemonSet runs on the node.
node2_kube_proxy_ready() {
  [[ "$(node2_kubectl -n kube-system get pods -l k8s-app=kube-proxy --field-selector "spec.nodeName=$NODE2_NAME" \
    -o 'jsonpath={.items[*].status.containerStatuses[*].ready}' 2>/dev/null)" == true ]]
}

# node2_up HOST_IP: joins the second node to the running first node.
node2_up() {
  local host_ip="$1" started="$SECONDS"
  if node2_netns_exists && node2_ready; then
    log "node $NODE2_NAME is up already"
    return 0
  fi
  node2_netns_exists || [[ -d "$NODE2_STATE_DIR" ]] &&
    die "a second node (or what one left) is here but is not Ready; run scripts/cluster.sh down first"
  mkdir -p "$NODE2_STATE_DIR" "$NODE2_RUN_DIR"
  node2_make_netns
  # The node's own reject rules (cluster-common.sh); they go with its namespace.
  add_service_reject ip netns exec "$NODE2_NETNS"
  node2_make_mount_ns
  node2_make_cgroup_root
  node2_host_rules -I
  node2_pod_rule ip netns exec "$NODE2_NETNS" iptables
  node2_start_forwarders
  node2_start_dockerd
  node2_start_cridock
  node2_write_join_config "$host_ip"
  node2_run_kubeadm_join
  node2_route_pods
  wait_until 300 node2_ready || die "node $NODE2_NAME not Ready within 5 minutes; see $ENV_LOG_DIR/cluster-node2-kubelet.log"
  wait_until 300 node2_kube_proxy_ready || die "kube-proxy is not ready on $NODE2_NAME within 5 minutes"
  log "node $NODE2_NAME joined in $((SECONDS - started)) s"
}

# --- down ------------------------------------------------------------------------

# Whether node 2 left anything: its namespaces, directories or daemons' pid files.
node2_present() {
  node2_netns_exists || node2_mount_ns_exists ||
    traces_present "${NODE2_DAEMONS[*]}" "$NODE2_STATE_DIR" "$NODE2_RUN_DIR"
}

# The node object goes (the first node's API server would keep it NotReady),
# kubelet stops, kubeadm reset removes its pods through cridock.
node2_reset() {
  node2_kubectl delete node "$NODE2_NAME" --wait=false >/dev/null 2>&1 || true
  stop_daemon cluster-node2-kubelet 30
  node2_mount_ns_exists && node2_netns_exists && node2_cri_answers || return 0
  log "kubeadm reset on node 2 (log: $NODE2_KUBEADM_LOG)"
  node2_in "$KUBERNETES_BIN_DIR/kubeadm" reset --cri-socket "unix://$NODE2_CRI_SOCKET" --force \
    </dev/null >>"$NODE2_KUBEADM_LOG" 2>&1 || log "kubeadm reset on node 2 failed; removing what is left by hand"
  local crictl=("$CRIDOCK_TOOLS_DIR/bin/crictl" --runtime-endpoint "unix://$NODE2_CRI_SOCKET" --timeout 10s) left=()
  mapfile -t left < <("${crictl[@]}" pods -q 2>/dev/null)
  ((${#left[@]} == 0)) || "${crictl[@]}" rmp --force "${left[@]}" >>"$NODE2_KUBEADM_LOG" 2>&1 || true
}

# Processes still in the node's network namespace (a container dockerd did
# not stop) are the node's: they go before the namespace does.
node2_kill_leftovers() {
  node2_netns_exists || return 0
  local pids=()
  mapfile -t pids < <(ip netns pids "$NODE2_NETNS" 2>/dev/null)
  ((${#pids[@]} == 0)) && return 0
  log "killing what is left in node 2's network namespace: ${pids[*]}"
  kill -KILL "${pids[@]}" 2>/dev/null || true
  sleep 1
}

node2_remove_created() {
  [[ -f "$NODE2_CREATED_STAMP" ]] || return 0
  local path
  while IFS= read -r path; do
    [[ -n "$path" ]] && rmdir "$path" 2>/dev/null || true
  done < <(tac "$NODE2_CREATED_STAMP")
}

node2_down() {
  node2_present || return 0
  local started="$SECONDS"
  node2_reset
  stop_daemon cluster-node2-cridock 30
  stop_daemon cluster-node2-dockerd 60
  node2_stop_forwarders
  node2_kill_leftovers
  # The namespaces go with their last process and their handles; their
  # mounts, bridges, veth pair, routes and iptables rules with them.
  if node2_mount_ns_exists; then umount "$NODE2_MOUNT_NS" || umount -l "$NODE2_MOUNT_NS"; fi
  awk -v d="$NODE2_NS_DIR" '$2 == d { found = 1 } END { exit !found }' /proc/self/mounts && umount -l "$NODE2_NS_DIR"
  node2_netns_exists && ip netns delete "$NODE2_NETNS"
  ip link show "$NODE2_LINK_HOST" >/dev/null 2>&1 && ip link delete "$NODE2_LINK_HOST"
  node2_remove_host_rules
  node2_remove_cgroup_root
  node2_remove_created
  rm -rf "$NODE2_STATE_DIR" "$NODE2_RUN_DIR"
  node2_verify_clean
  log "node 2 down in $((SECONDS - started)) s"
}

# What down must leave of the second node: nothing.
node2_verify_clean() {
  local left=() name
  for name in "${NODE2_DAEMONS[@]}"; do
    pid_of "$name" >/dev/null && left+=("process $name")
  done
  node2_netns_exists && left+=("network namespace $NODE2_NETNS")
  ip link show "$NODE2_LINK_HOST" >/dev/null 2>&1 && left+=("link $NODE2_LINK_HOST")
  [[ -e "$NODE2_STATE_DIR" || -e "$NODE2_RUN_DIR" ]] && left+=("files under $NODE2_STATE_DIR or $NODE2_RUN_DIR")
  node2_host_rules_present && left+=("iptables rules")
  [[ -d "/sys/fs/cgroup/memory${NODE2_CGROUP_ROOT}" ]] && left+=("cgroup $NODE2_CGROUP_ROOT")
  ((${#left[@]} == 0)) || die "down left of node 2: ${left[*]}"
}
