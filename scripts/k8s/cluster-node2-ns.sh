# The second node's namespaces and network (sourced by cluster-node2.sh,
# whose constants it uses): the network and mount namespaces, its cgroup
# root, the host's iptables rules for the link, and the socat forwarders
# that carry its loopback registry ports to the host's.

# shellcheck shell=bash

# The network namespace, the veth pair, addresses and routes. The node
# forwards (kubeadm's preflight checks it, and its pods' traffic needs it) and
# passes bridged traffic through iptables (kube-proxy's Service rules).
node2_make_netns() {
  ip netns add "$NODE2_NETNS"
  ip link add "$NODE2_LINK_HOST" type veth peer name "$NODE2_LINK_NODE" netns "$NODE2_NETNS"
  ip addr add "$NODE2_HOST_ADDR/${NODE2_LINK_SUBNET#*/}" dev "$NODE2_LINK_HOST"
  ip link set "$NODE2_LINK_HOST" up
  ip -n "$NODE2_NETNS" addr add "$NODE2_ADDR/${NODE2_LINK_SUBNET#*/}" dev "$NODE2_LINK_NODE"
  ip -n "$NODE2_NETNS" link set lo up
  ip -n "$NODE2_NETNS" link set "$NODE2_LINK_NODE" up
  ip -n "$NODE2_NETNS" route add default via "$NODE2_HOST_ADDR"
  ip -n "$NODE2_NETNS" link add "$CLUSTER_DOCKER_BRIDGE" type bridge
  ip netns exec "$NODE2_NETNS" sysctl -q -w net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 >/dev/null
}

# The mount namespace: made once with unshare, as a slave of the host's
# mounts (so a mount the host removes goes here too, and a copy made here
# never pins another engine's overlay or network namespace), then given the
# node's own paths and a
# sysfs of its network namespace (kubelet, dockerd and the CNI plugins read
# network devices there), with the host's cgroup tree moved back under it.
node2_make_mount_ns() {
  local path private
  mkdir -p "$NODE2_NS_DIR"
  mount --bind "$NODE2_NS_DIR" "$NODE2_NS_DIR"
  mount --make-private "$NODE2_NS_DIR"
  touch "$NODE2_MOUNT_NS"
  unshare --mount="$NODE2_MOUNT_NS" --propagation slave true
  for path in "${NODE2_PRIVATE_PATHS[@]}"; do
    private="$NODE2_STATE_DIR/root$path"
    mkdir -p "$private"
    node2_make_dir "$path"
    # The first node's kubelet makes /var/lib/kubelet a shared mount: its copy
    # here would keep receiving that kubelet's volume mounts, hidden below the
    # node's own directory but listed in /proc/mounts, where kubeadm reset
    # would fail to unmount them. The copy goes (a slave's unmount stays here).
    if node2_in mountpoint -q "$path"; then node2_in umount -l "$path"; fi
    node2_in mount --bind "$private" "$path"
  done
  node2_in sh -c '
    set -e
    mkdir -p "$1"
    mount --rbind /sys/fs/cgroup "$1"
    umount -l /sys
    mount -t sysfs sysfs /sys
    mount --move "$1" /sys/fs/cgroup
  ' sh "$NODE2_RUN_DIR/cgroup-move"
}

# Its own directory in every cgroup v1 hierarchy (cpuset needs its cpus and
# mems before anything joins it); kubelet checks the root exists.
node2_make_cgroup_root() {
  local hierarchy
  for hierarchy in /sys/fs/cgroup/*/; do
    [[ -e "$hierarchy/cgroup.procs" ]] || continue
    mkdir -p "$hierarchy${NODE2_CGROUP_ROOT#/}"
    if [[ -e "$hierarchy/cpuset.cpus" ]]; then
      cat "$hierarchy/cpuset.cpus" >"$hierarchy${NODE2_CGROUP_ROOT#/}/cpuset.cpus"
      cat "$hierarchy/cpuset.mems" >"$hierarchy${NODE2_CGROUP_ROOT#/}/cpuset.mems"
    fi
  done
}

# node2_pod_rule IPTABLES...: the pod-to-pod rule, in the host's namespace or
# the node's. The bridge plugin's ipMasq masquerades whatever leaves the
# node's own /24, which would hide a pod's address from a pod on the other
# node; pod-to-pod traffic skips it, except what kube-proxy marked for
# masquerade (a pod reaching itself through its Service).
node2_pod_rule() {
  "$@" -w -t nat -I POSTROUTING 1 -s "$CLUSTER_POD_SUBNET" -d "$CLUSTER_POD_SUBNET" \
    -m mark ! --mark 0x4000/0x4000 -m comment --comment "$NODE2_RULE_COMMENT" -j RETURN
}

# node2_host_rules -I|-D: the host's part, added or removed. It forwards
# whatever crosses the link (the host's FORWARD policy is DROP, and the
# firewall plugin accepts only what a pod of the first node started),
# masquerades what the node sends beyond the cluster (to the host's
# resolver, say), and keeps pod addresses across nodes.
node2_host_rules() {
  local action="$1" position=()
  [[ "$action" == -I ]] && position=(1)
  local comment=(-m comment --comment "$NODE2_RULE_COMMENT")
  iptables -w -t filter "$action" FORWARD "${position[@]}" -i "$NODE2_LINK_HOST" "${comment[@]}" -j ACCEPT
  iptables -w -t filter "$action" FORWARD "${position[@]}" -o "$NODE2_LINK_HOST" "${comment[@]}" -j ACCEPT
  iptables -w -t nat "$action" POSTROUTING "${position[@]}" -s "$NODE2_LINK_SUBNET" ! -d "$CLUSTER_POD_SUBNET" \
    ! -o "$NODE2_LINK_HOST" "${comment[@]}" -j MASQUERADE
  iptables -w -t nat "$action" POSTROUTING "${position[@]}" -s "$CLUSTER_POD_SUBNET" -d "$CLUSTER_POD_SUBNET" \
    -m mark ! --mark 0x4000/0x4000 "${comment[@]}" -j RETURN
}

# Whether a rule of node2_host_rules is in the host's tables (the whole dump
# is read: grep -q in a pipeline would end iptables-save early, and pipefail
# would then say "not there").
node2_host_rules_present() {
  [[ "$(iptables-save -t filter 2>/dev/null; iptables-save -t nat 2>/dev/null)" == *"$NODE2_RULE_COMMENT"* ]]
}

# Each rule as many times as it was added (an interrupted up may have added
# one twice), until iptables finds no more.
node2_remove_host_rules() {
  local i
  for ((i = 0; i < 5; i++)); do
    node2_host_rules_present || return 0
    node2_host_rules -D 2>/dev/null || true
  done
}

# Each forwarded port: a host socat from a unix socket to the host's
# loopback, and one in the node's namespace from its loopback to that socket.
node2_start_forwarders() {
  local port sock
  mkdir -p "$NODE2_RUN_DIR/forward"
  for port in "${NODE2_FORWARDED_PORTS[@]}"; do
    sock="$NODE2_RUN_DIR/forward/$port.sock"
    start_daemon "cluster-node2-forward-host-$port" socat "UNIX-LISTEN:$sock,fork,unlink-early,mode=0600" "TCP:127.0.0.1:$port"
    wait_until 10 test -S "$sock" || die "the forwarder for port $port did not make $sock"
    start_daemon "cluster-node2-forward-node-$port" nsenter --net="/run/netns/$NODE2_NETNS" -- \
      socat "TCP-LISTEN:$port,bind=127.0.0.1,fork,reuseaddr" "UNIX-CONNECT:$sock"
  done
}

# All at once: socat takes about 2 s to end on SIGTERM, one after another 12 s.
node2_stop_forwarders() {
  local port
  for port in "${NODE2_FORWARDED_PORTS[@]}"; do
    stop_daemon "cluster-node2-forward-node-$port" 5 &
    stop_daemon "cluster-node2-forward-host-$port" 5 &
  done
  wait
}

node2_remove_cgroup_root() {
  local hierarchy dir
  for hierarchy in /sys/fs/cgroup/*/; do
    dir="$hierarchy${NODE2_CGROUP_ROOT#/}"
    [[ -d "$dir" ]] || continue
    find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || log "could not remove cgroup $dir"
  done
}
