#!/usr/bin/env bash
# Prepares this machine (Debian, as root) for running and testing cridock:
# installs the Debian packages it lacks, starts dockerd when none answers,
# starts two local registries (plain on 127.0.0.1:5000, basic auth on
# 127.0.0.1:5001) and the TLS mirror that serves critest's images under their
# upstream names (scripts/env/mirror.sh), and builds, loads and pushes
# the test images.
#
# With --with-test-engines it also builds (once, cached) and starts the
# Docker Engine 29 setups the test suite runs on beside the node's dockerd
# (scripts/env/test-engines.sh); run-cridock.sh does not ask for them, and
# scripts/test.sh starts them itself once their build, which it runs in the
# background, is done.
#
# Idempotent: a second run finds everything in place and changes nothing.
# Quiet unless it does something or something is wrong. Logs go to
# /var/log/cridock-env, state to /var/lib/cridock-env, pid files of what it
# started to /run/cridock-env; scripts/env-teardown.sh stops those.
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=scripts/env/mirror.sh
source "$(dirname "${BASH_SOURCE[0]}")/mirror.sh"

# registry_answers ADDR: any HTTP answer on /v2/ (the auth registry says 401).
registry_answers() {
  local code
  code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$1/v2/" || true)"
  [[ "$code" == 200 || "$code" == 401 ]]
}

# ensure_registry NAME ADDR [HTPASSWD]
ensure_registry() {
  local name="$1" addr="$2"
  if pid_of "$name" >/dev/null; then
    wait_until 20 registry_answers "$addr" || die "$name (ours) does not answer on $addr; see $ENV_LOG_DIR/$name.log"
    return 0
  fi
  if registry_answers "$addr"; then
    log "something else already serves a registry on $addr; using it as it is"
    return 0
  fi
  write_registry_config "$@"
  log "starting $name on $addr (log: $ENV_LOG_DIR/$name.log)"
  start_daemon "$name" docker-registry serve "$ENV_STATE_DIR/$name/config.yml"
  wait_until 20 registry_answers "$addr" || die "$name did not answer on $addr within 20s; see $ENV_LOG_DIR/$name.log"
}

# The auth registry's password is made once and kept, so tests and pushed images stay valid across runs.
ensure_auth_credentials() {
  local htpasswd="$ENV_STATE_DIR/registry-auth/htpasswd"
  [[ -s "$AUTH_REGISTRY_FILE" && -s "$htpasswd" ]] && return 0
  mkdir -p "$(dirname "$htpasswd")"
  local password
  password="$(openssl rand -hex 16)"
  htpasswd -Bbn "$AUTH_REGISTRY_USER" "$password" >"$htpasswd"
  umask 077
  printf '{"address":"%s","username":"%s","password":"%s"}\n' "$AUTH_REGISTRY_ADDR" "$AUTH_REGISTRY_USER" "$password" >"$AUTH_REGISTRY_FILE"
  umask 022
}

# unpack_deb PACKAGE DIR CHECK: Debian's PACKAGE, downloaded and unpacked
# into DIR (not installed), unless DIR/CHECK is there already.
unpack_deb() {
  local package="$1" dir="$2" check="$3"
  [[ -e "$dir/$check" ]] && return 0
  local tmp
  tmp="$(mktemp -d)"
  # apt's sandbox user must be able to write the download directory.
  chmod 0755 "$tmp"
  log "fetching Debian's $package package for the test images"
  if ! (cd "$tmp" && apt-get download -q "$package") </dev/null >>"$ENV_LOG_DIR/apt.log" 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null >>"$ENV_LOG_DIR/apt.log" 2>&1 || true
    (cd "$tmp" && apt-get download -q "$package") </dev/null >>"$ENV_LOG_DIR/apt.log" 2>&1 ||
      { rm -rf "$tmp"; die "apt-get download $package failed; see $ENV_LOG_DIR/apt.log"; }
  fi
  rm -rf "$dir.new"
  dpkg-deb -x "$tmp/${package}"_*.deb "$dir.new" && rm -rf "$dir" && mv "$dir.new" "$dir"
  rm -rf "$tmp"
  [[ -e "$dir/$check" ]] || die "the $package package held no $check"
}

# Debian's dynamically linked busybox (it conflicts with busybox-static, so
# it is only unpacked) for the images whose shell must search PATH for every
# command (see SHELL_BUSYBOX in scripts/env/images/rootfs.ts), and Debian's nginx
# for the nginx images critest runs (see scripts/env/images/critest-images.ts).
ensure_unpacked_packages() {
  unpack_deb busybox "$ENV_STATE_DIR/busybox-deb" bin/busybox
  unpack_deb nginx "$ENV_STATE_DIR/nginx-deb" usr/sbin/nginx
}

build_test_images() {
  (cd "$CRIDOCK_REPO_ROOT" && CRIDOCK_TEST_DOCKER_ENDPOINT="unix://$DOCKER_SOCKET" \
    node_modules/.bin/tsx scripts/env/images/build.ts --state-dir "$ENV_STATE_DIR") 2>>"$ENV_LOG_DIR/images.log" ||
    die "building the test images failed; see $ENV_LOG_DIR/images.log"
}

main() {
  local engines=0
  case "${1:-}" in
    "") ;;
    --with-test-engines) engines=1 ;;
    *) die "usage: env/setup.sh [--with-test-engines]" ;;
  esac
  require_root
  mkdir -p "$ENV_STATE_DIR" "$ENV_LOG_DIR" "$ENV_RUN_DIR"
  install_missing_packages "${ENV_PACKAGES[@]}"
  ensure_node_modules
  use_pinned_node
  # The mirrored hosts resolve before dockerd starts: Go's resolver keeps
  # /etc/hosts for 5 s once read, so a dockerd that looked a name up just
  # before the mapping was added would push the mirror's images to the real
  # hosts ("no such host") on a fast setup.
  ensure_mirror_hosts
  ensure_dockerd
  ensure_auth_credentials
  ensure_registry registry "$REGISTRY_ADDR"
  ensure_registry registry-auth "$AUTH_REGISTRY_ADDR" "$ENV_STATE_DIR/registry-auth/htpasswd"
  ensure_mirror_registry
  ensure_unpacked_packages
  build_test_images
  if ((engines)); then
    bash "$CRIDOCK_REPO_ROOT/scripts/env/test-engines.sh" start
  fi
}

main "$@"
