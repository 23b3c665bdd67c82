# The single-node kubeadm cluster of scripts/cluster.sh (sourced after
# env/common.sh): where its parts live and the addresses it takes.
#
# It runs beside the test environment and beside the standalone kubelet
# suite (test/e2e), so nothing here is shared with them:
#   - its own dockerd (the Engine 29 build), data root and bridge: kubelet's
#     container and image garbage collection see only the cluster's pods;
#   - its own cridock socket, root directory and CNI configuration;
#   - kubelet on kubeadm's ports (10250, healthz 10248), which test/e2e does
#     not use (it takes a free port and no healthz port), with kubeadm's fixed
#     /var/lib/kubelet and /etc/kubernetes, which test/e2e keeps in scratch
#     directories of its own;
#   - a Service range and a pod range outside every subnet the test suites
#     use (10.88-10.98): kubeadm's default Service range, 10.96.0.0/12,
#     would cover test/e2e's pod network.

# shellcheck shell=bash
# shellcheck disable=SC2034  # constants for the scripts that source this file

CLUSTER_NAME="cridock"
CLUSTER_NODE_NAME="cridock-cluster"
CLUSTER_STATE_DIR="/var/lib/cridock-cluster"
CLUSTER_RUN_DIR="/run/cridock-cluster"
CLUSTER_DOCKER_SOCKET="$CLUSTER_RUN_DIR/docker.sock"
CLUSTER_CRI_SOCKET="$CLUSTER_RUN_DIR/cridock.sock"
CLUSTER_DOCKER_BRIDGE="cridock-kd0"
CLUSTER_CNI_BRIDGE="cridock-k8s0"
CLUSTER_CNI_CONF_DIR="$CLUSTER_STATE_DIR/cni/net.d"
CLUSTER_POD_SUBNET="10.113.0.0/16"
CLUSTER_SERVICE_SUBNET="10.112.0.0/16"
CLUSTER_DNS_DOMAIN="cluster.local"
CLUSTER_API_PORT=6443
CLUSTER_KUBEADM_CONFIG="$CLUSTER_STATE_DIR/kubeadm.yaml"
# What kubeadm writes (fixed paths in kubeadm), and the admin kubeconfig `up` prints.
KUBEADM_KUBELET_DIR="/var/lib/kubelet"
KUBEADM_CONFIG_DIR="/etc/kubernetes"
CLUSTER_KUBECONFIG="$KUBEADM_CONFIG_DIR/admin.conf"
# The daemons cluster.sh starts, by their start_daemon names (pid files in
# $ENV_RUN_DIR, logs in $ENV_LOG_DIR), in the order they start.
CLUSTER_DAEMONS=(cluster-dockerd cluster-cridock cluster-kubelet)

cluster_kubectl() {
  "$KUBERNETES_BIN_DIR/kubectl" --kubeconfig "$CLUSTER_KUBECONFIG" "$@"
}

# The address the API server advertises: the source address of the default
# route (kubeadm's own choice too, made explicit so that kubelet's node IP,
# the certificates and the CNI masquerade rules agree on it).
cluster_host_ip() {
  ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n 1
}

# The QoS hierarchy kubelet makes under its cgroupRoot (cgroupsPerQOS, the
# cgroupfs driver), in every cgroup v1 hierarchy and on a cgroup v2 root:
# kubepods, its burstable and besteffort children and the pod<uid> cgroups.
# kubelet never removes kubepods itself. Deepest first; a cgroup that still
# holds a process stays (rmdir refuses it), and nothing is touched while a
# kubelet runs on this host, since the hierarchy may be its. A second kubelet
# on this host needs a cgroupRoot of its own: kubelet removes the pod cgroups
# under its kubepods that belong to no pod it knows.
#
# remove_kubelet_cgroups [ROOT]: ROOT is the cgroupRoot below each
# hierarchy's mount ("" for /; "/node2" removes /node2/kubepods and /node2).
remove_kubelet_cgroups() {
  local under="${1:-}" root
  pgrep -x kubelet >/dev/null && return 0
  for root in /sys/fs/cgroup /sys/fs/cgroup/*; do
    [[ -d "$root" && ! -L "$root" && -f "$root$under/kubepods/cgroup.procs" ]] || continue
    find "$root$under/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [[ -z "$under" ]] || rmdir "$root$under" 2>/dev/null || true
  done
}

# kubepods_left [ROOT]: the kubepods cgroups under ROOT still on this host, one a line.
kubepods_left() {
  local under="${1:-}" root
  for root in /sys/fs/cgroup /sys/fs/cgroup/*; do
    [[ -d "$root$under/kubepods" && ! -L "$root" ]] && echo "$root$under/kubepods"
  done
  return 0
}

# traces_present "DAEMON..." DIR...: whether a node left anything: one of
# its directories, or a pid file of one of its daemons.
traces_present() {
  local daemons name path
  read -ra daemons <<<"$1"
  shift
  for path in "$@"; do
    [[ -d "$path" ]] && return 0
  done
  for name in "${daemons[@]}"; do
    [[ -f "$ENV_RUN_DIR/$name.pid" ]] && return 0
  done
  return 1
}

# private_dockerd_command BIN SOCKET STATE_DIR RUN_DIR BRIDGE NAMESPACE: sets
# DOCKERD_COMMAND to the command line of a private dockerd of the Engine 29
# build in BIN (each cluster node's and the node suite's): its own socket,
# data and exec roots, pid file, bridge and containerd namespaces, and no
# iptables, masquerading or forwarding of its own (pods are on the CNI
# network, and kube-proxy owns the Service rules).
private_dockerd_command() {
  local bin="$1" socket="$2" state_dir="$3" run_dir="$4" bridge="$5" namespace="$6"
  DOCKERD_COMMAND=(env PATH="$bin:$PATH" "$bin/dockerd"
    --host="unix://$socket"
    --data-root="$state_dir/docker"
    --exec-root="$run_dir/docker-exec"
    --pidfile="$run_dir/dockerd.pid"
    --bridge="$bridge"
    --iptables=false --ip6tables=false --ip-masq=false --ip-forward=false
    --userland-proxy-path="$bin/docker-proxy"
    --containerd-namespace="$namespace"
    --containerd-plugins-namespace="$namespace-plugins")
}

# cridock_command STATE_DIR CRI_SOCKET DOCKER_SOCKET CNI_CONF_DIR: sets
# CRIDOCK_COMMAND to the command line of a node's cridock (each cluster
# node's and the node suite's): kubeadm's pause image, the node's own state,
# CNI configuration and CNI cache, and no cri-dockerd state to take over.
cridock_command() {
  local state_dir="$1" cri_socket="$2" docker_socket="$3" cni_conf_dir="$4"
  # The pinned Node (use_pinned_node), as the package's executable runs cridock.
  [[ -n "${CRIDOCK_NODE:-}" ]] || use_pinned_node
  CRIDOCK_COMMAND=(env UV_THREADPOOL_SIZE=16 "$CRIDOCK_NODE" "$CRIDOCK_REPO_ROOT/bin/cridock.js"
    --container-runtime-endpoint="unix://$cri_socket"
    --docker-endpoint="unix://$docker_socket"
    --pod-infra-container-image="registry.k8s.io/pause:$KUBEADM_PAUSE_VERSION"
    --root-directory="$state_dir/cridock"
    --cri-dockerd-root-directory=
    --cni-conf-dir="$cni_conf_dir"
    --cni-cache-dir="$state_dir/cni/cache")
}

# kubelet_command FLAGS_FILE: sets KUBELET_COMMAND to kubelet's command line
# as kubeadm's systemd drop-in gives it, nothing more: the kubeconfigs and
# config kubeadm wrote, and KUBELET_KUBEADM_ARGS from FLAGS_FILE
# (kubeadm-flags.env).
kubelet_command() {
  local KUBELET_KUBEADM_ARGS="" args=()
  # shellcheck disable=SC1090  # written by kubeadm
  source "$1"
  read -r -a args <<<"$KUBELET_KUBEADM_ARGS"
  KUBELET_COMMAND=("$KUBERNETES_BIN_DIR/kubelet"
    --bootstrap-kubeconfig="$KUBEADM_CONFIG_DIR/bootstrap-kubelet.conf"
    --kubeconfig="$KUBEADM_CONFIG_DIR/kubelet.conf"
    --config="$KUBEADM_KUBELET_DIR/config.yaml"
    "${args[@]}")
}

# kubeadm_starting_kubelet LOG START_KUBELET COMMAND...: runs kubeadm (init or
# join) in the background with its output in LOG, and calls START_KUBELET once
# kubeadm has written kubelet's files and said it could not start the kubelet
# service itself (no systemd here). Returns kubeadm's status;
# KUBEADM_STARTED_KUBELET is 1 when kubelet was started.
kubeadm_starting_kubelet() {
  local log_file="$1" start_kubelet="$2"; shift 2
  "$@" </dev/null >>"$log_file" 2>&1 &
  local kubeadm=$! i
  KUBEADM_STARTED_KUBELET=0
  for ((i = 0; i < 600; i++)); do
    if ((!KUBEADM_STARTED_KUBELET)) && grep -qE '^\[kubelet-start\] .*(kubelet is running properly|running manually)' "$log_file"; then
      "$start_kubelet"
      KUBEADM_STARTED_KUBELET=1
    fi
    running_job "$kubeadm" || break
    sleep 1
  done
  wait "$kubeadm"
}

# --- untranslated Service traffic -------------------------------------------
#
# kube-proxy in iptables mode translates only the ClusterIP ports a Service
# serves; a packet to any other port of the Service range (a TCP connection to
# a UDP-only Service, say) leaves untranslated by the default route, where a
# network that answers every outbound connection would accept it. kube-proxy's
# nftables mode rejects such traffic; this chain does the same on each node,
# TCP with a reset and the rest with ICMP port unreachable. It is matched in
# filter, after kube-proxy's DNAT (nat OUTPUT for the node's own processes,
# nat PREROUTING for its pods), so whatever is still addressed to the Service
# range was not translated, and no list of served ports is needed.
#
# Jumps to it: OUTPUT and FORWARD, first; and CNI-ADMIN, the chain the CNI
# firewall plugin evaluates for its pods before it accepts their traffic (the
# plugin puts its own FORWARD jump first when it finds none, and never
# removes CNI-ADMIN, which other CNI networks on the host share).
SERVICE_REJECT_CHAIN="CRIDOCK-SERVICE-REJECT"
SERVICE_REJECT_PARENTS=(OUTPUT FORWARD CNI-ADMIN)

# add_service_reject [PREFIX...]: makes the chain and its jumps, once each,
# with iptables run behind PREFIX (e.g. `ip netns exec NS`).
add_service_reject() {
  local parent
  remove_service_reject "$@"
  "$@" iptables -w -t filter -N "$SERVICE_REJECT_CHAIN"
  "$@" iptables -w -t filter -A "$SERVICE_REJECT_CHAIN" -d "$CLUSTER_SERVICE_SUBNET" -p tcp -j REJECT --reject-with tcp-reset
  "$@" iptables -w -t filter -A "$SERVICE_REJECT_CHAIN" -d "$CLUSTER_SERVICE_SUBNET" -j REJECT --reject-with icmp-port-unreachable
  "$@" iptables -w -t filter -N CNI-ADMIN 2>/dev/null || true
  for parent in "${SERVICE_REJECT_PARENTS[@]}"; do
    "$@" iptables -w -t filter -I "$parent" 1 -d "$CLUSTER_SERVICE_SUBNET" -j "$SERVICE_REJECT_CHAIN"
  done
}

# service_reject_present [PREFIX...]: whether the chain is there (the whole
# dump is read first, as in node2_host_rules_present).
service_reject_present() {
  [[ "$("$@" iptables-save -t filter 2>/dev/null)" == *":$SERVICE_REJECT_CHAIN "* ]]
}

# remove_service_reject [PREFIX...]: every jump (an interrupted up may have
# added one twice), then the chain.
remove_service_reject() {
  local parent i
  service_reject_present "$@" || return 0
  for parent in "${SERVICE_REJECT_PARENTS[@]}"; do
    for ((i = 0; i < 5; i++)); do
      "$@" iptables -w -t filter -D "$parent" -d "$CLUSTER_SERVICE_SUBNET" -j "$SERVICE_REJECT_CHAIN" 2>/dev/null || break
    done
  done
  "$@" iptables -w -t filter -F "$SERVICE_REJECT_CHAIN"
  "$@" iptables -w -t filter -X "$SERVICE_REJECT_CHAIN"
}
