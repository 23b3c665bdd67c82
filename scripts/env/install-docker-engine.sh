#!/usr/bin/env bash
# Builds the current Docker Engine the tests run against, beside Debian's
# 20.10: dockerd and docker-proxy from the Go module github.com/moby/moby/v2
# and the runc that moby release pins, into
# ${CRIDOCK_TOOLS_DIR:-/var/cache/cridock-tools}/docker-engine/<versions>/bin.
# The directory name carries the versions, so a version bump builds anew
# and an unchanged one is reused (the build takes minutes on 2 cores).
#
# dockerd is built as moby's own scripts (hack/make.sh) build a static
# binary: CGO_ENABLED=0 with the tags netgo osusergo static_build nri_no_wasm,
# plus exclude_graphdriver_btrfs (the btrfs driver needs cgo). runc needs cgo
# for seccomp (Debian's libseccomp-dev); the libpathrs tag of runc's Makefile
# is left out, as Debian 12 has no libpathrs. Debian's runc 1.1.5 cannot
# serve this engine ("namespace time does not exist"); Debian's containerd
# 1.6 can, as the engine's managed containerd.
#
# Prints the bin directory on stdout.
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build_engine() {
  local go="$1" out="$2" scratch pkg="github.com/moby/moby/v2" ldflags
  scratch="$(mktemp -d /tmp/cridock-docker-engine.XXXXXX)"
  # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
  trap "rm -rf '$scratch'" EXIT
  local started=$SECONDS
  log "building dockerd $DOCKER_ENGINE_VERSION ($MOBY_MODULE_VERSION) and runc $RUNC_VERSION (about 10 minutes on 2 cores; log: $ENV_LOG_DIR/docker-engine-build.log)"
  module_copy "$go" "$pkg@$MOBY_MODULE_VERSION" "$scratch/moby"
  module_copy "$go" "github.com/opencontainers/runc@$RUNC_VERSION" "$scratch/runc"
  ldflags="-w -X $pkg/dockerversion.Version=$DOCKER_ENGINE_VERSION -X $pkg/dockerversion.GitCommit=$MOBY_MODULE_VERSION"
  ldflags+=" -X $pkg/dockerversion.BuildTime=$(date -u +%Y-%m-%dT%H:%M:%SZ) -X $pkg/dockerversion.PlatformName=cridock-test"
  mkdir -p "$scratch/bin"
  (
    set -x
    cd "$scratch/moby"
    CGO_ENABLED=0 "$go" build -mod=mod -trimpath -ldflags "$ldflags" \
      -tags "netgo osusergo static_build nri_no_wasm exclude_graphdriver_btrfs" \
      -o "$scratch/bin/dockerd" ./cmd/dockerd
    CGO_ENABLED=0 "$go" build -mod=mod -trimpath -ldflags "-w" -tags "netgo osusergo static_build" \
      -o "$scratch/bin/docker-proxy" ./cmd/docker-proxy
    cd "$scratch/runc"
    CGO_ENABLED=1 "$go" build -mod=mod -trimpath -buildmode=pie -tags "seccomp urfave_cli_no_docs" \
      -ldflags "-X main.gitCommit=$RUNC_VERSION" -o "$scratch/bin/runc" .
  ) </dev/null >>"$ENV_LOG_DIR/docker-engine-build.log" 2>&1 ||
    die "building Docker Engine failed; see $ENV_LOG_DIR/docker-engine-build.log"
  "$scratch/bin/dockerd" --version >/dev/null && "$scratch/bin/runc" --version >/dev/null ||
    die "the freshly built dockerd or runc does not run; see $ENV_LOG_DIR/docker-engine-build.log"
  mkdir -p "$(dirname "$out")"
  rm -rf "$out.new"
  mv "$scratch/bin" "$out.new"
  mv "$out.new" "$out"
  log "installed dockerd, docker-proxy and runc in $out (built in $((SECONDS - started)) s)"
}

main() {
  require_root
  mkdir -p "$ENV_LOG_DIR"
  tool_lock docker-engine
  if [[ ! -x "$DOCKER_ENGINE_BIN_DIR/dockerd" || ! -x "$DOCKER_ENGINE_BIN_DIR/docker-proxy" || ! -x "$DOCKER_ENGINE_BIN_DIR/runc" ]]; then
    dpkg-query -W -f='${Status}' libseccomp-dev 2>/dev/null | grep -q "install ok installed" ||
      die "libseccomp-dev is missing (scripts/env/setup.sh installs it)"
    build_engine "$(find_go "building Docker Engine $DOCKER_ENGINE_VERSION")" "$DOCKER_ENGINE_BIN_DIR"
  fi
  echo "$DOCKER_ENGINE_BIN_DIR"
}

main "$@"
