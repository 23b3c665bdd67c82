#!/usr/bin/env bash
# A single-node Kubernetes cluster on this machine, made by kubeadm on
# cridock: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
# run as static pods through cridock, kube-proxy as a DaemonSet and CoreDNS
# as a Deployment, on a CNI bridge network. RBAC, Node authorization and
# kubeadm's certificates, as any kubeadm cluster.
#
#   cluster.sh up [--nodes 1|2]
#                     builds or reuses what it needs, starts a private dockerd
#                     (the Engine 29 build), cridock on it, runs `kubeadm init`,
#                     starts kubelet from exactly what kubeadm wrote (systemd is
#                     not PID 1 here, so kubeadm cannot start it), waits for the
#                     node to be Ready and CoreDNS to answer, and prints the
#                     `export KUBECONFIG=…` line on stdout. With --nodes 2
#                     (or CRIDOCK_CLUSTER_NODES=2), then joins a second node
#                     on this machine in namespaces of its own
#                     (scripts/k8s/cluster-node2.sh).
#   cluster.sh down   the second node first, if there is one; then `kubeadm reset` (every pod removed through CRI), then
#                     stops the daemons and removes what up made: iptables
#                     chains (kube-proxy's, and the one that rejects
#                     untranslated Service traffic), mounts, bridges and files.
#   cluster.sh status exits 0 when the cluster answers.
#   cluster.sh restart kubelet|cridock
#                     stops one daemon and starts it again as up did (the
#                     cluster suite checks that no container restarts).
#
# Logs: /var/log/cridock-env/cluster-*.log. See scripts/k8s/cluster-common.sh
# for the directories, sockets, ports and subnets it takes.
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/env/common.sh"
# shellcheck source=scripts/k8s/cluster-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s/cluster-common.sh"
# shellcheck source=scripts/k8s/cluster-config.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s/cluster-config.sh"
# shellcheck source=scripts/k8s/cluster-node2.sh
source "$(dirname "${BASH_SOURCE[0]}")/k8s/cluster-node2.sh"

KUBEADM_LOG="$ENV_LOG_DIR/cluster-kubeadm.log"
# Host files and directories up found missing and made (removed by down), one a line.
CREATED_STAMP="$CLUSTER_STATE_DIR/created"
# Host sysctls kubelet and kube-proxy set, saved by up and restored by down.
SYSCTL_STAMP="$CLUSTER_STATE_DIR/sysctls"
TOUCHED_SYSCTLS=(net.ipv4.conf.all.route_localnet vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops)

socket_answers() {
  [[ -S "$1" ]] && curl -sf --max-time 2 --unix-socket "$1" "$2" >/dev/null
}

cri_answers() {
  "$CRIDOCK_TOOLS_DIR/bin/crictl" --runtime-endpoint "unix://$CLUSTER_CRI_SOCKET" --timeout 2s version >/dev/null 2>&1
}

api_answers() {
  cluster_kubectl get --raw /readyz >/dev/null 2>&1
}

# --- up ---------------------------------------------------------------------

build_prerequisites() {
  bash "$CRIDOCK_REPO_ROOT/scripts/env/setup.sh"
  bash "$CRIDOCK_REPO_ROOT/scripts/env/install-cri-tools.sh"
  bash "$CRIDOCK_REPO_ROOT/scripts/env/install-kubernetes.sh"
  bash "$CRIDOCK_REPO_ROOT/scripts/env/cluster-images.sh"
}

# remember_created PATH: PATH is about to be made by up; down removes it.
remember_created() {
  [[ -e "$1" ]] && return 0
  mkdir -p "$CLUSTER_STATE_DIR"
  echo "$1" >>"$CREATED_STAMP"
}

save_sysctls() {
  [[ -f "$SYSCTL_STAMP" ]] && return 0
  local key
  for key in "${TOUCHED_SYSCTLS[@]}"; do
    printf '%s=%s\n' "$key" "$(sysctl -n "$key")"
  done >"$SYSCTL_STAMP"
}

start_cluster_dockerd() {
  local bin
  bin="$(bash "$CRIDOCK_REPO_ROOT/scripts/env/install-docker-engine.sh")"
  socket_answers "$CLUSTER_DOCKER_SOCKET" http://docker/_ping && return 0
  mkdir -p "$CLUSTER_RUN_DIR" "$CLUSTER_STATE_DIR/docker"
  ip link show "$CLUSTER_DOCKER_BRIDGE" >/dev/null 2>&1 || ip link add "$CLUSTER_DOCKER_BRIDGE" type bridge
  log "starting the cluster's dockerd (Engine $DOCKER_ENGINE_VERSION) on $CLUSTER_DOCKER_SOCKET"
  private_dockerd_command "$bin" "$CLUSTER_DOCKER_SOCKET" "$CLUSTER_STATE_DIR" "$CLUSTER_RUN_DIR" "$CLUSTER_DOCKER_BRIDGE" cridock-cluster
  start_daemon cluster-dockerd "${DOCKERD_COMMAND[@]}"
  wait_until 60 socket_answers "$CLUSTER_DOCKER_SOCKET" http://docker/_ping ||
    die "the cluster's dockerd did not answer within 60 s; see $ENV_LOG_DIR/cluster-dockerd.log"
}

start_cluster_cridock() {
  cri_answers && return 0
  write_cni_config
  log "starting cridock on $CLUSTER_CRI_SOCKET"
  cridock_command "$CLUSTER_STATE_DIR" "$CLUSTER_CRI_SOCKET" "$CLUSTER_DOCKER_SOCKET" "$CLUSTER_CNI_CONF_DIR"
  start_daemon cluster-cridock "${CRIDOCK_COMMAND[@]}"
  wait_until 60 cri_answers || die "cridock did not answer within 60 s; see $ENV_LOG_DIR/cluster-cridock.log"
}

# kubelet runs with the command line of kubeadm's systemd drop-in, nothing more.
start_cluster_kubelet() {
  kubelet_command "$KUBEADM_KUBELET_DIR/kubeadm-flags.env"
  log "starting kubelet: ${KUBELET_COMMAND[*]}"
  start_daemon cluster-kubelet "${KUBELET_COMMAND[@]}"
}

# kubeadm init in the background; kubelet starts once kubeadm has written its
# files and said it could not start the kubelet service itself.
run_kubeadm_init() {
  : >"$KUBEADM_LOG"
  log "kubeadm init (log: $KUBEADM_LOG)"
  local status=0
  # Its preflight runs `kubelet --version` from PATH.
  kubeadm_starting_kubelet "$KUBEADM_LOG" start_cluster_kubelet \
    env PATH="$KUBERNETES_BIN_DIR:$PATH" "$KUBERNETES_BIN_DIR/kubeadm" init --config "$CLUSTER_KUBEADM_CONFIG" || status=$?
  ((status == 0)) || die "kubeadm init failed ($status); see $KUBEADM_LOG and $ENV_LOG_DIR/cluster-kubelet.log"
  ((KUBEADM_STARTED_KUBELET)) || die "kubeadm init never reached its kubelet-start phase; see $KUBEADM_LOG"
}

node_ready() {
  [[ "$(cluster_kubectl get node "$CLUSTER_NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

# CoreDNS answers a query for the API server's Service, asked from the host
# through the DNS Service's ClusterIP (so kube-proxy's rules work too).
dns_answers() {
  local dns_ip
  dns_ip="$(cluster_kubectl -n kube-system get service kube-dns -o 'jsonpath={.spec.clusterIP}' 2>/dev/null)" || return 1
  [[ -n "$dns_ip" ]] || return 1
  grep -q "Address.*${CLUSTER_SERVICE_SUBNET%.*/*}" <<<"$(busybox nslookup "kubernetes.default.svc.$CLUSTER_DNS_DOMAIN" "$dns_ip" 2>/dev/null)"
}

wait_ready() {
  wait_until 300 node_ready || die "node $CLUSTER_NODE_NAME not Ready within 5 minutes; see $ENV_LOG_DIR/cluster-kubelet.log"
  cluster_kubectl -n kube-system rollout status deployment/coredns --timeout=300s >&2 ||
    die "CoreDNS did not roll out; see kubectl -n kube-system get pods"
  wait_until 120 dns_answers || die "CoreDNS does not answer for kubernetes.default through its Service"
}

cluster_up() {
  if api_answers && node_ready; then
    log "the cluster is up already"
    echo "export KUBECONFIG=$CLUSTER_KUBECONFIG"
    return 0
  fi
  [[ ! -e "$KUBEADM_KUBELET_DIR/kubeadm-flags.env" && ! -e "$CLUSTER_KUBECONFIG" ]] ||
    die "a cluster (or what one left) is here but does not answer; run scripts/cluster.sh down first"
  local started="$SECONDS" host_ip
  build_prerequisites
  host_ip="$(cluster_host_ip)"
  [[ -n "$host_ip" ]] || die "this host has no default route to take the API server's address from"
  mkdir -p "$CLUSTER_STATE_DIR"
  remember_created "$KUBEADM_CONFIG_DIR"
  remember_created "$KUBEADM_KUBELET_DIR"
  save_sysctls
  add_service_reject
  write_kubeadm_config "$host_ip"
  start_cluster_dockerd
  start_cluster_cridock
  run_kubeadm_init
  wait_ready
  log "cluster up in $((SECONDS - started)) s: node $CLUSTER_NODE_NAME Ready, CoreDNS answers"
  echo "export KUBECONFIG=$CLUSTER_KUBECONFIG"
}

# --- down -------------------------------------------------------------------

# The chains kube-proxy made (its own --cleanup knows them all), and kubelet's
# canary and hint chains unless another kubelet on this host still uses them.
remove_iptables_chains() {
  [[ -x "$KUBERNETES_BIN_DIR/kube-proxy" ]] &&
    "$KUBERNETES_BIN_DIR/kube-proxy" --cleanup >>"$ENV_LOG_DIR/cluster-kubeadm.log" 2>&1 || true
  pgrep -x kubelet >/dev/null && return 0
  local tool table chain
  for tool in iptables ip6tables; do
    for table in mangle nat filter; do
      for chain in KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        "$tool" -w -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
}

restore_sysctls() {
  [[ -f "$SYSCTL_STAMP" ]] || return 0
  local line
  while IFS= read -r line; do
    sysctl -q -w "$line" >/dev/null 2>&1 || log "could not restore sysctl $line"
  done <"$SYSCTL_STAMP"
}

remove_created() {
  [[ -f "$CREATED_STAMP" ]] || return 0
  local path
  while IFS= read -r path; do
    [[ -n "$path" ]] || continue
    unmount_beneath "$path"
    rm -rf "$path"
  done < <(tac "$CREATED_STAMP")
}

# Whether up left anything: its directories or a daemon's pid file.
cluster_present() {
  traces_present "${CLUSTER_DAEMONS[*]}" "$CLUSTER_STATE_DIR" "$CLUSTER_RUN_DIR"
}

# kubeadm reset calls RemovePodSandbox only after a StopPodSandbox succeeded,
# so a sandbox whose network teardown keeps failing is left behind;
# RemovePodSandbox removes it anyway (and cridock logs what the failing CNI
# plugin may have kept).
remove_left_sandboxes() {
  local crictl=("$CRIDOCK_TOOLS_DIR/bin/crictl" --runtime-endpoint "unix://$CLUSTER_CRI_SOCKET" --timeout 10s) left=()
  mapfile -t left < <("${crictl[@]}" pods -q 2>/dev/null)
  ((${#left[@]} > 0)) || return 0
  log "removing ${#left[@]} pod sandbox(es) kubeadm reset left: ${left[*]}"
  "${crictl[@]}" rmp "${left[@]}" >>"$KUBEADM_LOG" 2>&1 || log "crictl rmp failed (see $KUBEADM_LOG)"
}

cluster_down() {
  node2_down
  # Before the check below: a run killed early in up may have left only these.
  remove_service_reject
  if ! cluster_present; then
    log "no cluster here"
    return 0
  fi
  # kubelet first: it would recreate the static pods kubeadm reset removes.
  stop_daemon cluster-kubelet 30
  if [[ -x "$KUBERNETES_BIN_DIR/kubeadm" ]] && cri_answers; then
    log "kubeadm reset (log: $KUBEADM_LOG)"
    "$KUBERNETES_BIN_DIR/kubeadm" reset --cri-socket "unix://$CLUSTER_CRI_SOCKET" --force </dev/null >>"$KUBEADM_LOG" 2>&1 ||
      log "kubeadm reset failed; removing what is left by hand (see $KUBEADM_LOG)"
    remove_left_sandboxes
  fi
  stop_daemon cluster-cridock 30
  stop_daemon cluster-dockerd 60
  remove_iptables_chains
  restore_sysctls
  unmount_beneath "$KUBEADM_KUBELET_DIR"
  unmount_beneath "$CLUSTER_RUN_DIR"
  unmount_beneath "$CLUSTER_STATE_DIR"
  local bridge
  for bridge in "$CLUSTER_CNI_BRIDGE" "$CLUSTER_DOCKER_BRIDGE"; do
    ip link show "$bridge" >/dev/null 2>&1 && ip link delete "$bridge" type bridge
  done
  remove_created
  rm -rf "$CLUSTER_RUN_DIR" "$CLUSTER_STATE_DIR"
  remove_kubelet_cgroups
  verify_clean
  log "cluster down"
}

# What down must leave: none of up's processes, mounts, bridges, files,
# kube-proxy chains, Service reject chain or kubelet's QoS cgroups. Says what is left and fails if anything is.
verify_clean() {
  local left=() name path
  for name in "${CLUSTER_DAEMONS[@]}"; do
    pid_of "$name" >/dev/null && left+=("process $name")
  done
  for path in "$CLUSTER_STATE_DIR" "$CLUSTER_RUN_DIR" "$KUBEADM_KUBELET_DIR/kubeadm-flags.env" "$CLUSTER_KUBECONFIG"; do
    [[ -e "$path" ]] && left+=("file $path")
  done
  awk -v a="$CLUSTER_STATE_DIR/" -v b="$CLUSTER_RUN_DIR/" -v c="$KUBEADM_KUBELET_DIR/" \
    'index($2, a) == 1 || index($2, b) == 1 || index($2, c) == 1 { found = 1 } END { exit !found }' /proc/self/mounts &&
    left+=("mounts under the cluster's directories")
  for name in "$CLUSTER_CNI_BRIDGE" "$CLUSTER_DOCKER_BRIDGE"; do
    ip link show "$name" >/dev/null 2>&1 && left+=("bridge $name")
  done
  # The whole dump is read first: grep -q at a pipeline's end would stop
  # iptables-save early, and pipefail would then report the chains gone.
  grep -q '^:KUBE-\(SERVICES\|NODEPORTS\|POSTROUTING\|FORWARD\|PROXY-FIREWALL\) ' <<<"$(iptables-save 2>/dev/null)" &&
    left+=("kube-proxy's iptables chains")
  service_reject_present && left+=("iptables chain $SERVICE_REJECT_CHAIN")
  if ! pgrep -x kubelet >/dev/null; then
    for path in $(kubepods_left); do left+=("cgroup $path"); done
  fi
  ((${#left[@]} == 0)) || die "down left: ${left[*]}"
}

main() {
  require_root
  mkdir -p "$ENV_LOG_DIR"
  case "${1:-}" in
    up)
      local nodes="${CRIDOCK_CLUSTER_NODES:-1}"
      [[ "${2:-}" == --nodes ]] && nodes="${3:-}"
      [[ "${2:-}" == --nodes=* ]] && nodes="${2#--nodes=}"
      [[ "$nodes" == 1 || "$nodes" == 2 ]] || die "up takes --nodes 1 or --nodes 2, not '$nodes'"
      cluster_up
      if [[ "$nodes" == 2 ]]; then node2_up "$(cluster_host_ip)"; fi
      ;;
    down) cluster_down ;;
    status) api_answers && node_ready ;;
    restart)
      case "${2:-}" in
        kubelet) stop_daemon cluster-kubelet 30 && start_cluster_kubelet ;;
        cridock) stop_daemon cluster-cridock 30 && start_cluster_cridock ;;
        *) die "usage: cluster.sh restart kubelet|cridock" ;;
      esac
      ;;
    *) die "usage: cluster.sh up [--nodes 1|2]|down|status|restart kubelet|cridock" ;;
  esac
}

main "$@"
