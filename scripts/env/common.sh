# Shared by the env scripts (sourced, not run): where things live, the
# packages the environment needs, and helpers for background daemons that
# the scripts start and stop through pid files.

# shellcheck shell=bash
# shellcheck disable=SC2034  # constants for the scripts that source this file

CRIDOCK_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ENV_STATE_DIR="/var/lib/cridock-env"
ENV_LOG_DIR="/var/log/cridock-env"
ENV_RUN_DIR="/run/cridock-env"
CRIDOCK_TOOLS_DIR="${CRIDOCK_TOOLS_DIR:-/var/cache/cridock-tools}"
# The pinned versions (scripts/env/versions.env, the one place they are set).
# shellcheck source=scripts/env/versions.env
source "$CRIDOCK_REPO_ROOT/scripts/env/versions.env"
# Kubernetes for the e2e suite, the kubelet bench and the kubeadm cluster
# (scripts/env/install-kubernetes.sh builds them): the current release, or
# the one CRIDOCK_KUBERNETES_VERSION names (the previous-release lane, the
# next release's). With it, the etcd and CoreDNS that kubeadm of that minor
# deploys (its constants.DefaultEtcdVersion and CoreDNSVersion) and the pause
# image it expects (constants.PauseVersion). KUBERNETES_CURRENT_VERSION
# stays the pinned current release whichever one this process builds or runs.
KUBERNETES_CURRENT_VERSION="$KUBERNETES_VERSION"
KUBERNETES_VERSION="${CRIDOCK_KUBERNETES_VERSION:-${CRIDOCK_KUBELET_VERSION:-$KUBERNETES_VERSION}}"
KUBELET_VERSION="$KUBERNETES_VERSION"
kubernetes_minor_key="$(sed -n 's/^v1\.\([0-9]*\)\..*$/1_\1/p' <<<"$KUBERNETES_VERSION")"
kubeadm_pin() {
  local name="KUBEADM_$1_$kubernetes_minor_key"
  [[ -n "${!name:-}" ]] || { printf 'cridock-env: error: scripts/env/versions.env has no %s for Kubernetes %s\n' "$name" "$KUBERNETES_VERSION" >&2; exit 1; }
  printf '%s\n' "${!name}"
}
ETCD_VERSION="$(kubeadm_pin ETCD)" || exit 1
COREDNS_VERSION="$(kubeadm_pin COREDNS)" || exit 1
KUBEADM_PAUSE_VERSION="$(kubeadm_pin PAUSE)" || exit 1
KUBERNETES_BIN_DIR="$CRIDOCK_TOOLS_DIR/kubernetes/$KUBERNETES_VERSION/bin"
COREDNS_BIN_DIR="$CRIDOCK_TOOLS_DIR/coredns/$COREDNS_VERSION/bin"
KUBERNETES_TEST_BIN_DIR="$CRIDOCK_TOOLS_DIR/kubernetes/$KUBERNETES_VERSION/test-bin"

# The current Docker Engine the tests also run on (scripts/env/install-docker-engine.sh
# builds it): the moby/moby/v2 module tag, the engine release it is (moby's
# releases/versions.yaml), and the runc that release pins (its Dockerfile).
DOCKER_ENGINE_BIN_DIR="$CRIDOCK_TOOLS_DIR/docker-engine/$DOCKER_ENGINE_VERSION-moby-$MOBY_MODULE_VERSION-runc-$RUNC_VERSION/bin"
# The two setups of that engine that scripts/env/test-engines.sh runs beside the
# node's dockerd (Debian's 20.10 on $DOCKER_SOCKET): the classic image store
# and the containerd image store. Each has its own socket, data root, exec
# root, pid file and bridge (interface names are at most 15 characters).
TEST_ENGINES=(docker29 docker29-containerd)
declare -A TEST_ENGINE_BRIDGE=([docker29]=cridock-d29 [docker29-containerd]=cridock-d29c)
declare -A TEST_ENGINE_SNAPSHOTTER=([docker29]=false [docker29-containerd]=true)
test_engine_socket() { printf '%s/%s/docker.sock\n' "$ENV_RUN_DIR" "$1"; }
test_engine_endpoint() { printf 'unix://%s\n' "$(test_engine_socket "$1")"; }

REGISTRY_ADDR="127.0.0.1:5000"
AUTH_REGISTRY_ADDR="127.0.0.1:5001"
AUTH_REGISTRY_USER="cridock"
AUTH_REGISTRY_FILE="$ENV_STATE_DIR/auth-registry.json"
DOCKER_SOCKET="/var/run/docker.sock"
# The registry hosts critest pulls from by name; scripts/env/mirror.sh
# serves them locally. Keep in step with MIRRORED_REGISTRIES in test/helpers/env.ts.
MIRROR_HOSTS=(gcr.io registry.k8s.io k8s.gcr.io)
# install_missing_packages records here every Debian package it installed
# (dependencies too), one a line: what scripts/env/fresh-machine.sh purges.
ENV_INSTALLED_PACKAGES="$ENV_STATE_DIR/installed-packages"
# run-cridock.sh records here the CNI config it installed, for teardown.
DEFAULT_CNI_STAMP="$ENV_STATE_DIR/default-cni-installed"
DEFAULT_CNI_BRIDGE="cni0"

# Debian packages, in one place. RUN_PACKAGES are what running cridock needs
# (scripts/run-cridock.sh installs only these): the engine, CNI plugins,
# iptables for the bridge network's firewall plugin, nsenter (util-linux),
# socat for port forwarding, iproute2 for taking pods over from cri-dockerd,
# curl for the scripts' own look at dockerd. ENV_PACKAGES add what the tests need:
# htpasswd (apache2-utils) makes the auth registry's password file; procps
# and util-linux also supply the pgrep and ipcs binaries the busybox test
# image carries. systemd supplies the tools the service tests play systemd's
# part with (systemd-analyze verify, systemd-socket-activate, systemd-notify);
# it is not booted. dpkg-dev (dpkg-shlibdeps), binutils (strip) and lintian
# build and check the .deb. conntrack goes (with iptables) into the kube-proxy
# image, and gcc with libc6-dev builds the static pause binary of the pause
# image.
RUN_PACKAGES=(
  docker.io containerd runc iptables containernetworking-plugins
  iproute2 util-linux socat ca-certificates curl
)
ENV_PACKAGES=(
  "${RUN_PACKAGES[@]}"
  docker-registry busybox-static apache2-utils
  procps psmisc openssl systemd libseccomp-dev
  dpkg-dev binutils lintian
  conntrack gcc libc6-dev
)
# What scripts/env/conformance-images.sh takes from the host: the tools agnhost
# and glibc-dns-testing carry (dig, nslookup, nc, iperf), as the kube-proxy
# image takes iptables, and make and bzip2 for the upstream busybox build.
CONFORMANCE_IMAGE_PACKAGES=(bind9-dnsutils netcat-openbsd iperf iproute2 curl procps util-linux make bzip2)

# What scripts/vm/node.sh needs on the host to build and run the cgroup v2
# test node (a Debian VM; docs/testing.md, "The cgroup v2 node"), apart
# from the rest: only the suites that name that node need them. qemu runs
# it (TCG: no usable KVM is assumed; qemu-system-x86 itself comes from
# scripts/vm/host.sh, which needs a newer one than Debian 12's) and qemu-img
# makes its disk and each VM's overlay; debootstrap makes its root file
# system and e2fsprogs' mke2fs the disk from that directory (no loop
# device); openssh-client reaches it (ssh-keygen, ssh); iproute2's ss finds
# a free port for its ssh forward and util-linux gives unshare (private
# mounts for the chroot) and flock.
VM_HOST_PACKAGES=(
  qemu-utils debootstrap debian-archive-keyring e2fsprogs
  openssh-client iproute2 util-linux socat
)
# The apt source scripts/vm/host.sh adds when this host's release has a
# qemu older than the node needs (its backports suite), and
# scripts/env/fresh-machine.sh removes.
VM_BACKPORTS_LIST="/etc/apt/sources.list.d/cridock-env-backports.list"

log() { printf 'cridock-env: %s\n' "$*" >&2; }
die() { printf 'cridock-env: error: %s\n' "$*" >&2; exit 1; }

require_root() {
  [[ "$(id -u)" == 0 ]] || die "run this as root (it installs packages and starts dockerd)"
}

# running_job PID: whether PID is a background job of this shell that has
# not ended. Asked of bash's job table rather than of the kernel: once the job
# has ended its pid is free, and in a run of an hour the pids wrap (pid_max
# is 32768 on many hosts), so `kill -0` may find another process under it.
running_job() {
  [[ -n "$1" ]] && jobs -rp | grep -qx -- "$1"
}

# pid_of NAME: the pid recorded for a daemon we started, if it is still alive.
pid_of() {
  local file="$ENV_RUN_DIR/$1.pid" pid
  [[ -f "$file" ]] || return 1
  pid="$(cat "$file")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
  printf '%s\n' "$pid"
}

# start_daemon NAME COMMAND...: runs COMMAND in its own session, detached
# from our stdin and terminal, logging to $ENV_LOG_DIR/NAME.log, and records
# its pid so teardown stops exactly this process.
# START_DAEMON_NICE=N lowers the daemon's priority against everything else.
# `nice` alone cannot: with the kernel's autogroup scheduling (on by
# default, /proc/sys/kernel/sched_autogroup_enabled) each session is a
# scheduling group of its own, and a process's nice value orders it only
# among its own session's. A daemon started niced in a new session got the
# same share of the cores as the whole test run's session. So the session's
# group gets the nice value too (/proc/self/autogroup, see sched(7)).
start_daemon() {
  local name="$1"; shift
  local lower=()
  [[ -z "${START_DAEMON_NICE:-}" ]] ||
    lower=(bash -c 'echo "$0" >/proc/self/autogroup 2>/dev/null || true; exec nice -n "$0" "$@"' "$START_DAEMON_NICE")
  mkdir -p "$ENV_RUN_DIR" "$ENV_LOG_DIR"
  # The daemon gets none of our other file descriptors: one may hold a lock
  # (a setup run under flock(1)) that a long-lived daemon must not keep.
  # setsid does not fork here (a background job is no group leader), so $! is the daemon itself.
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd="${fd##*/}"
      ((fd > 2)) && eval "exec $fd>&-" 2>/dev/null
    done
    exec setsid "${lower[@]}" "$@" </dev/null >>"$ENV_LOG_DIR/$name.log" 2>&1
  ) &
  echo "$!" >"$ENV_RUN_DIR/$name.pid"
}

# stop_daemon NAME [SECONDS]: SIGTERM the recorded pid, wait, then SIGKILL.
stop_daemon() {
  local name="$1" seconds="${2:-20}" pid i
  if ! pid="$(pid_of "$name")"; then
    rm -f "$ENV_RUN_DIR/$name.pid"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < seconds * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name (pid $pid) ignored SIGTERM for ${seconds}s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$ENV_RUN_DIR/$name.pid"
  log "stopped $name"
}

# mounts_beneath DIR: the mount points strictly beneath DIR, one a line
# (the octal escapes of blanks stay, as no directory of ours has one).
mounts_beneath() { awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo; }

# unmount_beneath DIR: lazily unmounts what is mounted beneath DIR, the
# deepest first (a path sorts after its parent, so reversed it comes first).
unmount_beneath() {
  local point
  while IFS= read -r point; do
    umount -l "$point" 2>/dev/null || true
  done < <(mounts_beneath "$1" | sort -r)
}

# bridge_ports NAME: the interfaces attached to bridge NAME, one a line (none when it does not exist).
bridge_ports() { ip -o link show master "$1" 2>/dev/null || true; }

# delete_bridge NAME: only when no interface is still attached to it (a pod still running keeps it).
delete_bridge() {
  local bridge="$1"
  ip link show "$bridge" >/dev/null 2>&1 || return 0
  if [[ -n "$(bridge_ports "$bridge")" ]]; then
    log "bridge $bridge still has interfaces attached; leaving it"
    return 0
  fi
  ip link delete "$bridge" type bridge && log "deleted bridge $bridge"
}

# wait_until SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_until() {
  local seconds="$1" i; shift
  for ((i = 0; i < seconds * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

docker_answers() {
  [[ -S "$DOCKER_SOCKET" ]] && curl -sf --max-time 2 --unix-socket "$DOCKER_SOCKET" http://docker/_ping >/dev/null
}

# install_missing_packages PACKAGE...: apt-get install of those not installed yet.
install_missing_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  ((${#missing[@]} == 0)) && return 0
  install_packages "${missing[@]}"
}

# install_packages [--release SUITE] PACKAGE...: apt-get install of them
# (an upgrade of those installed), from SUITE when given (apt's -t, for a
# backports suite, whose packages apt never picks by itself).
install_packages() {
  local release=()
  if [[ "${1:-}" == --release ]]; then
    release=(-t "$2")
    shift 2
  fi
  log "installing Debian packages: $*${release[*]:+ (from ${release[1]})}"
  # Keep the packages' own services (dockerd, the Debian registry on :5000)
  # from starting during the install: this script starts what it needs, on
  # the addresses it chose. The policy file exists only while apt runs.
  local policy=/usr/sbin/policy-rc.d ours=0
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    ours=1
  fi
  local status=0 before
  before="$(installed_package_names)"
  {
    # A background build (scripts/env/prebuild-tools.sh) may install packages
    # while a suite does: wait for dpkg's lock rather than fail at once.
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -q &&
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${release[@]}" "$@"
  } </dev/null >>"$ENV_LOG_DIR/apt.log" 2>&1 || status=$?
  ((ours)) && rm -f "$policy"
  # What this install added, dependencies included, for scripts/env/fresh-machine.sh to purge.
  mkdir -p "$ENV_STATE_DIR"
  comm -13 <(echo "$before") <(installed_package_names) >>"$ENV_INSTALLED_PACKAGES"
  ((status == 0)) || die "apt-get failed (exit $status); see $ENV_LOG_DIR/apt.log"
}

installed_package_names() {
  dpkg-query -W -f='${db:Status-Status} ${Package}\n' | sed -n 's/^installed //p' | sort
}

# ensure_dockerd: starts the node's dockerd unless one answers on $DOCKER_SOCKET.
ensure_dockerd() {
  docker_answers && return 0
  if pid_of dockerd >/dev/null; then
    log "dockerd we started earlier is alive but not answering yet; waiting"
  else
    command -v dockerd >/dev/null || die "dockerd is not installed (package docker.io)"
    log "starting dockerd (log: $ENV_LOG_DIR/dockerd.log)"
    start_daemon dockerd dockerd --host="unix://$DOCKER_SOCKET"
  fi
  wait_until 60 docker_answers || die "dockerd did not answer on $DOCKER_SOCKET within 60s; see $ENV_LOG_DIR/dockerd.log"
}

# ensure_node_modules: npm ci when node_modules is missing or older than the lock file.
# The machine's node only runs npm and the build tools here (Node 20, end of
# life, still does that); cridock itself runs on the pinned Node (use_pinned_node).
ensure_node_modules() {
  command -v node >/dev/null || die "node is not installed: the scripts need one to run npm, tsx and esbuild (Debian's nodejs and npm packages do)"
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  ((major >= 20)) || die "node $(node --version) is too old to run the build tools (npm, tsx, esbuild); install a newer nodejs"
  local stamp="$CRIDOCK_REPO_ROOT/node_modules/.package-lock.json"
  if [[ ! -f "$stamp" || "$CRIDOCK_REPO_ROOT/package-lock.json" -nt "$stamp" ]]; then
    log "installing node modules (npm ci; log: $ENV_LOG_DIR/npm.log)"
    mkdir -p "$ENV_LOG_DIR"
    # npm ci only: it installs exactly what package-lock.json records or fails.
    # The lock file records every optional per-platform package (deno's), so it
    # passes on any platform; a failure is a real one and is not papered over.
    (cd "$CRIDOCK_REPO_ROOT" && npm ci --no-audit --no-fund --loglevel=error </dev/null) >>"$ENV_LOG_DIR/npm.log" 2>&1 ||
      die "npm ci failed; see $ENV_LOG_DIR/npm.log"
  fi
}

# use_pinned_node: the Node cridock ships and runs on (scripts/build/node-runtime.json),
# fetched once into the tools cache, first on PATH from here on, and in
# CRIDOCK_NODE: tap, tsx, npm and every cridock the suites and scripts start
# run on it, never on the machine's node. Needs node_modules (tsx runs the
# fetch, on the machine's node this once).
use_pinned_node() {
  local bin
  bin="$(cd "$CRIDOCK_REPO_ROOT" && CRIDOCK_TOOLS_DIR="$CRIDOCK_TOOLS_DIR" node_modules/.bin/tsx scripts/build/node-runtime.ts bin </dev/null)" ||
    die "fetching the pinned Node (scripts/build/node-runtime.json) into $CRIDOCK_TOOLS_DIR failed"
  [[ -x "$bin/node" ]] || die "the pinned Node's $bin/node is missing"
  case ":$PATH:" in
    ":$bin:"*) ;;
    *) export PATH="$bin:$PATH" ;;
  esac
  export CRIDOCK_NODE="$bin/node"
}

# tool_lock NAME: holds an exclusive lock named NAME in the tools cache until
# the calling script exits. scripts/test.sh builds the tools in the
# background while the first suites run (scripts/env/prebuild-tools.sh), and the
# suites call the same install scripts when they need a tool: the second
# caller waits for the first build to finish, then finds the tool in place,
# instead of building into the same directory at once.
tool_lock() {
  local name="$1" fd
  mkdir -p "$CRIDOCK_TOOLS_DIR/.locks"
  exec {fd}>"$CRIDOCK_TOOLS_DIR/.locks/$name.lock"
  flock -n "$fd" && return 0
  log "waiting for the build of $name already under way (log: $ENV_LOG_DIR/prebuild.log)"
  flock "$fd"
}

# module_copy GO MODULE@VERSION DEST: a writable copy of a module's source
# (the module cache is read-only; builds write go.sum).
module_copy() {
  local go="$1" module="$2" dest="$3" dir
  dir="$("$go" mod download -json "$module" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  [[ -n "$dir" && -d "$dir" ]] || die "go mod download $module gave no module directory"
  cp -r "$dir" "$dest"
  chmod -R u+w "$dest"
}

# find_go WHAT: the Go toolchain to build WHAT with (PATH, then /usr/local/go).
find_go() {
  if command -v go >/dev/null; then
    command -v go
  elif [[ -x /usr/local/go/bin/go ]]; then
    echo /usr/local/go/bin/go
  else
    die "Go is not installed: $1 needs a recent Go toolchain (go.dev/dl) on PATH or in /usr/local/go"
  fi
}

# write_registry_config NAME ADDR [HTPASSWD] [TLS_DIR]: a config for Debian's
# docker-registry in $ENV_STATE_DIR/NAME, with htpasswd auth and HTTPS (TLS_DIR
# holds server.crt and server.key) when given.
write_registry_config() {
  local name="$1" addr="$2" htpasswd="${3:-}" tls="${4:-}" dir="$ENV_STATE_DIR/$1"
  mkdir -p "$dir/storage"
  {
    cat <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $dir/storage
  delete:
    enabled: true
http:
  addr: $addr
EOF
    if [[ -n "$tls" ]]; then
      cat <<EOF
  tls:
    certificate: $tls/server.crt
    key: $tls/server.key
EOF
    fi
    if [[ -n "$htpasswd" ]]; then
      cat <<EOF
auth:
  htpasswd:
    realm: cridock-test
    path: $htpasswd
EOF
    fi
  } >"$dir/config.yml.new"
  mv "$dir/config.yml.new" "$dir/config.yml"
}
