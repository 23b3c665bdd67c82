# The files scripts/cluster.sh hands kubeadm and cridock (sourced after
# cluster-common.sh): kubeadm's configuration and the pod network's CNI
# configuration.

# shellcheck shell=bash

# Preflight checks this host cannot pass, each with its reason; every other
# check stays an error. On this host kubeadm v1.36 fails only
# SystemVerification, and only because the host runs cgroup v1 (kubeadm
# never reads failCgroupV1; kubelet does, from the KubeletConfiguration below).
CLUSTER_IGNORED_PREFLIGHT=(
  SystemVerification # cgroup v1 host: kubelet runs with failCgroupV1: false
)

# write_kubeadm_config HOST_IP: kubeadm's InitConfiguration, ClusterConfiguration,
# KubeletConfiguration and KubeProxyConfiguration in one file.
write_kubeadm_config() {
  local host_ip="$1" check ignored=""
  for check in "${CLUSTER_IGNORED_PREFLIGHT[@]}"; do ignored+="    - $check"$'\n'; done
  mkdir -p "$(dirname "$CLUSTER_KUBEADM_CONFIG")"
  cat >"$CLUSTER_KUBEADM_CONFIG.new" <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: $host_ip
  bindPort: $CLUSTER_API_PORT
nodeRegistration:
  name: $CLUSTER_NODE_NAME
  criSocket: unix://$CLUSTER_CRI_SOCKET
  imagePullPolicy: IfNotPresent
  # The node's name resolves nowhere; kubelet takes the API server's address rather than look it up.
  kubeletExtraArgs:
    - name: node-ip
      value: $host_ip
  # One node runs the control plane and the workloads: no control-plane taint.
  taints: []
  ignorePreflightErrors:
$ignored---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: $CLUSTER_NAME
kubernetesVersion: $KUBERNETES_VERSION
networking:
  podSubnet: $CLUSTER_POD_SUBNET
  serviceSubnet: $CLUSTER_SERVICE_SUBNET
  dnsDomain: $CLUSTER_DNS_DOMAIN
etcd:
  local:
    dataDir: $CLUSTER_STATE_DIR/etcd
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host is cgroup v1; kubelet refuses it unless told.
failCgroupV1: false
# No systemd here: cgroupfs, as dockerd uses.
cgroupDriver: cgroupfs
# Pods in kubelet's QoS hierarchy, as on any kubeadm node: kubepods/ (its
# limit is the node's allocatable: kubeadm's enforceNodeAllocatable ["pods"]),
# kubepods/burstable, kubepods/besteffort, and a pod<uid> cgroup per pod that
# cridock hands Docker as every container's CgroupParent. In-place resize
# needs that pod cgroup: kubelet sizes it before and after the containers.
# cluster.sh down removes the hierarchy (remove_kubelet_cgroups).
cgroupsPerQOS: true
cgroupRoot: /
# Its own pod log directory: a kubelet removes the log directories of pods it
# does not know, so two kubelets on one host must not share one.
podLogsDir: $CLUSTER_STATE_DIR/pod-logs
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $CLUSTER_POD_SUBNET
# A shared machine: leave the host's conntrack table size and timeouts as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
  mv "$CLUSTER_KUBEADM_CONFIG.new" "$CLUSTER_KUBEADM_CONFIG"
}

# The pod range is the node's pod CIDR: the controller manager allocates it
# from the pod subnet (kubeadm passes --allocate-node-cidrs with podSubnet),
# kubelet hands it to cridock (UpdateRuntimeConfig), and cridock to the
# bridge plugin's host-local IPAM as the ipRanges capability. The config
# names no range of its own: host-local puts the runtime's ranges before
# the configured ones and refuses an overlap. Until kubelet has sent the
# CIDR, an ADD fails and kubelet retries; only pods off the host network
# need it, and the control plane and kube-proxy are on it.
#
# The firewall plugin accepts the pods' forwarded traffic: the node's dockerd
# sets the FORWARD policy to DROP, and kube-proxy's own FORWARD rules accept
# only what it masquerades or what is already established, so a pod's first
# packet to a Service (DNAT'd back onto the bridge) would be dropped.
write_cni_config() {
  mkdir -p "$CLUSTER_CNI_CONF_DIR" "$CLUSTER_STATE_DIR/cni/ipam"
  cat >"$CLUSTER_CNI_CONF_DIR/10-cluster.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "cridock-cluster",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CLUSTER_CNI_BRIDGE",
      "capabilities": { "ipRanges": true },
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$CLUSTER_STATE_DIR/cni/ipam",
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "firewall" },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
  cat >"$CLUSTER_CNI_CONF_DIR/99-loopback.conf" <<EOF
{ "cniVersion": "1.0.0", "name": "lo", "type": "loopback" }
EOF
}
