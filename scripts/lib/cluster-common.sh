# The single-node kubeadm cluster of scripts/cluster.sh (sourced after
# env-common.sh): where its parts live and the addresses it takes.
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
