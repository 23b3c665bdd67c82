# The mirror registry (sourced by env/setup.sh and env-teardown.sh, after
# env/common.sh): critest v1.36 pulls images by their upstream names
# (gcr.io/k8s-staging-cri-tools/..., registry.k8s.io/..., k8s.gcr.io/...), and
# only package registries are reachable here. So a Debian docker-registry
# serves those names over TLS on 127.0.0.1:443, /etc/hosts points the
# hostnames at 127.0.0.1, and dockerd trusts a CA made once by this script
# through /etc/docker/certs.d/<host>/ca.crt (a current engine with the
# containerd image store reads the same directory).
#
# Every host change is recorded so teardown undoes exactly it: the /etc/hosts
# line carries a marker, each ca.crt is removed only if it still holds our CA,
# and the certs.d directories only if this script made them.

# shellcheck shell=bash
# shellcheck disable=SC2034  # constants for the scripts that source this file

MIRROR_ADDR="127.0.0.1:443"
MIRROR_TLS_DIR="$ENV_STATE_DIR/mirror-tls"
MIRROR_CA="$MIRROR_TLS_DIR/ca.crt"
DOCKER_CERTS_DIR="/etc/docker/certs.d"
HOSTS_FILE="${CRIDOCK_HOSTS_FILE:-/etc/hosts}"
HOSTS_MARKER="# cridock-env mirror registry"
# certs.d directories this script created, one a line, for teardown.
MIRROR_CERTS_STAMP="$ENV_STATE_DIR/mirror-certs-created"

# The CA (kept across runs: a new one would have to be trusted again) and a
# server certificate naming every mirrored host, remade when the list changes.
ensure_mirror_certificates() {
  mkdir -p "$MIRROR_TLS_DIR"
  if [[ ! -s "$MIRROR_CA" || ! -s "$MIRROR_TLS_DIR/ca.key" ]]; then
    log "making the mirror registry's CA ($MIRROR_CA)"
    (
      umask 077
      openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
        -subj "/CN=cridock test mirror CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout "$MIRROR_TLS_DIR/ca.key" -out "$MIRROR_CA.new"
    ) >>"$ENV_LOG_DIR/mirror-tls.log" 2>&1 || die "openssl could not make the CA; see $ENV_LOG_DIR/mirror-tls.log"
    chmod 0644 "$MIRROR_CA.new"
    mv "$MIRROR_CA.new" "$MIRROR_CA"
    rm -f "$MIRROR_TLS_DIR/server.crt"
  fi
  local names="DNS:${MIRROR_HOSTS[*]}"
  names="${names// /,DNS:},IP:127.0.0.1"
  if [[ -s "$MIRROR_TLS_DIR/server.crt" && "$(cat "$MIRROR_TLS_DIR/server.names" 2>/dev/null)" == "$names" ]]; then
    return 0
  fi
  log "making the mirror registry's certificate for ${MIRROR_HOSTS[*]}"
  (
    umask 077
    cd "$MIRROR_TLS_DIR" &&
      openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=${MIRROR_HOSTS[0]}" \
        -keyout server.key -out server.csr &&
      printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' "$names" >server.ext &&
      openssl x509 -req -sha256 -days 3650 -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
        -extfile server.ext -out server.crt.new &&
      rm -f server.csr server.ext
  ) >>"$ENV_LOG_DIR/mirror-tls.log" 2>&1 || die "openssl could not make the server certificate; see $ENV_LOG_DIR/mirror-tls.log"
  mv "$MIRROR_TLS_DIR/server.crt.new" "$MIRROR_TLS_DIR/server.crt"
  echo "$names" >"$MIRROR_TLS_DIR/server.names"
  # A running mirror holds the old certificate: restart it.
  stop_daemon registry-mirror
}

# /etc/hosts is often a bind mount (containers, some VMs): it is rewritten in
# place, never replaced.
hosts_without_marker() {
  grep -vF -- "$HOSTS_MARKER" "$HOSTS_FILE" || true
}

ensure_mirror_hosts() {
  local line="127.0.0.1 ${MIRROR_HOSTS[*]}  $HOSTS_MARKER"
  grep -qxF -- "$line" "$HOSTS_FILE" && return 0
  local rest
  rest="$(hosts_without_marker)"
  printf '%s\n%s\n' "$rest" "$line" >"$HOSTS_FILE"
  log "mapped ${MIRROR_HOSTS[*]} to 127.0.0.1 in $HOSTS_FILE"
}

remove_mirror_hosts() {
  [[ -f "$HOSTS_FILE" ]] && grep -qF -- "$HOSTS_MARKER" "$HOSTS_FILE" || return 0
  local rest
  rest="$(hosts_without_marker)"
  printf '%s\n' "$rest" >"$HOSTS_FILE"
  log "removed the mirror hosts from $HOSTS_FILE"
}

ensure_mirror_trust() {
  local host dir
  if [[ ! -d "$DOCKER_CERTS_DIR" ]]; then
    mkdir -p "$DOCKER_CERTS_DIR"
    echo "$DOCKER_CERTS_DIR" >>"$MIRROR_CERTS_STAMP"
  fi
  for host in "${MIRROR_HOSTS[@]}"; do
    dir="$DOCKER_CERTS_DIR/$host"
    if [[ ! -d "$dir" ]]; then
      mkdir -p "$dir"
      echo "$dir" >>"$MIRROR_CERTS_STAMP"
    fi
    cmp -s "$MIRROR_CA" "$dir/ca.crt" && continue
    [[ -e "$dir/ca.crt" ]] && ! grep -qxF "$dir" "$MIRROR_CERTS_STAMP" 2>/dev/null &&
      die "$dir/ca.crt exists and is not ours; move it away to let the test mirror serve $host"
    install -m 0644 "$MIRROR_CA" "$dir/ca.crt"
  done
}

remove_mirror_trust() {
  local host dir
  for host in "${MIRROR_HOSTS[@]}"; do
    dir="$DOCKER_CERTS_DIR/$host"
    [[ -f "$dir/ca.crt" && -f "$MIRROR_CA" ]] && cmp -s "$MIRROR_CA" "$dir/ca.crt" && rm -f "$dir/ca.crt"
  done
  # Last made, first removed: the host directories before certs.d itself.
  if [[ -f "$MIRROR_CERTS_STAMP" ]]; then
    while IFS= read -r dir; do
      [[ -n "$dir" ]] && rmdir "$dir" 2>/dev/null || true
    done < <(tac "$MIRROR_CERTS_STAMP")
    rm -f "$MIRROR_CERTS_STAMP"
  fi
}

mirror_answers() {
  local code
  code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 --cacert "$MIRROR_CA" "https://${MIRROR_HOSTS[0]}/v2/" || true)"
  [[ "$code" == 200 ]]
}

ensure_mirror_registry() {
  ensure_mirror_certificates
  ensure_mirror_hosts
  ensure_mirror_trust
  if pid_of registry-mirror >/dev/null; then
    wait_until 20 mirror_answers || die "registry-mirror (ours) does not answer on https://${MIRROR_HOSTS[0]}/v2/; see $ENV_LOG_DIR/registry-mirror.log"
    return 0
  fi
  if ss -Hltn "sport = :${MIRROR_ADDR##*:}" 2>/dev/null | grep -q .; then
    die "something else listens on port ${MIRROR_ADDR##*:}; the mirror registry needs $MIRROR_ADDR"
  fi
  write_registry_config registry-mirror "$MIRROR_ADDR" "" "$MIRROR_TLS_DIR"
  log "starting registry-mirror on $MIRROR_ADDR for ${MIRROR_HOSTS[*]} (log: $ENV_LOG_DIR/registry-mirror.log)"
  start_daemon registry-mirror docker-registry serve "$ENV_STATE_DIR/registry-mirror/config.yml"
  wait_until 20 mirror_answers || die "registry-mirror did not answer on https://${MIRROR_HOSTS[0]}/v2/ within 20s; see $ENV_LOG_DIR/registry-mirror.log"
}

remove_mirror_registry() {
  stop_daemon registry-mirror
  remove_mirror_trust
  remove_mirror_hosts
}
