#!/usr/bin/env bash
# Builds crictl and critest (cri-tools at CRI_TOOLS_VERSION, scripts/env/versions.env) with Go into
# ${CRIDOCK_TOOLS_DIR:-/var/cache/cridock-tools}/bin, unless a version stamp
# says they are there already. critest is the Ginkgo test binary of
# cmd/critest (`go test -c`), as upstream's Makefile builds it. Beside it
# goes the ginkgo CLI at the version cri-tools' go.mod pins: critest's
# -parallel=N runs its specs in N processes through the `ginkgo` on the PATH.
#
# Usage: install-cri-tools.sh [--check|--link] [crictl|checkpointctl]
#   crictl   crictl alone: what running cridock needs (scripts/run-cridock.sh);
#            critest and ginkgo are the tests'
#   checkpointctl  checkpointctl $CHECKPOINTCTL_VERSION alone (not part of the
#            default set): it reads the archives CheckpointContainer writes
#            (test/vm-lifecycle/checkpoint.test.ts); built static (CGO_ENABLED=0) so the
#            cgroup v2 VM node's older libc runs it
#   --check  build nothing: exit 0 when the tools are there, 1 otherwise
#   --link   then link crictl into /usr/local/bin when no crictl is on the
#            PATH (recorded for scripts/env-teardown.sh)
#
# `go install ...@version` needs the module proxy's version list, which may
# be refused; downloading the exact module version and building inside a
# scratch copy of it works with Go's default settings.
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

BIN_DIR="$CRIDOCK_TOOLS_DIR/bin"
# One stamp per tool; the single stamp of earlier versions of this script
# vouches for both.
LEGACY_STAMP="$BIN_DIR/.cri-tools-version"
MODULE="sigs.k8s.io/cri-tools"

# installed TOOL: TOOL is there, built from $CRI_TOOLS_VERSION (checkpointctl: $CHECKPOINTCTL_VERSION).
installed() {
  [[ -x "$BIN_DIR/$1" ]] || return 1
  if [[ "$1" == checkpointctl ]]; then
    [[ -f "$BIN_DIR/.checkpointctl-version" && "$(cat "$BIN_DIR/.checkpointctl-version")" == "$CHECKPOINTCTL_VERSION" ]]
    return
  fi
  [[ -f "$BIN_DIR/.$1-version" && "$(cat "$BIN_DIR/.$1-version")" == "$CRI_TOOLS_VERSION" ]] ||
    [[ -f "$LEGACY_STAMP" && "$(cat "$LEGACY_STAMP")" == "$CRI_TOOLS_VERSION" ]]
}

# build_tools GO TOOL...: builds the named tools (crictl, critest, ginkgo) from one download of the module.
build_tools() {
  local go="$1" scratch ldflags tool; shift
  scratch="$(mktemp -d /tmp/cridock-cri-tools.XXXXXX)"
  # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
  trap "rm -rf '$scratch'" EXIT
  log "building $* from cri-tools $CRI_TOOLS_VERSION (a few minutes; log: $ENV_LOG_DIR/cri-tools.log)"
  module_copy "$go" "$MODULE@$CRI_TOOLS_VERSION" "$scratch/src"
  ldflags="-X $MODULE/pkg/version.Version=$CRI_TOOLS_VERSION"
  mkdir -p "$BIN_DIR"
  for tool in "$@"; do
    (
      cd "$scratch/src"
      case "$tool" in
        crictl) "$go" build -mod=mod -trimpath -ldflags "$ldflags" -o "$scratch/crictl" ./cmd/crictl ;;
        critest) CGO_ENABLED=0 "$go" test -mod=mod -trimpath -ldflags "$ldflags" -c -o "$scratch/critest" ./cmd/critest ;;
        # The CLI from the module graph critest was built in, so both speak the same ginkgo.
        ginkgo) CGO_ENABLED=0 "$go" build -mod=mod -trimpath -o "$scratch/ginkgo" github.com/onsi/ginkgo/v2/ginkgo ;;
      esac
    ) </dev/null >>"$ENV_LOG_DIR/cri-tools.log" 2>&1 || die "building $tool failed; see $ENV_LOG_DIR/cri-tools.log"
    install -m 0755 "$scratch/$tool" "$BIN_DIR/$tool"
    echo "$CRI_TOOLS_VERSION" >"$BIN_DIR/.$tool-version"
  done
  log "installed $* from cri-tools $CRI_TOOLS_VERSION in $BIN_DIR"
}

# build_checkpointctl GO: checkpointctl from one download of its module, as build_tools does.
build_checkpointctl() {
  local go="$1" scratch module="github.com/checkpoint-restore/checkpointctl"
  scratch="$(mktemp -d /tmp/cridock-checkpointctl.XXXXXX)"
  # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
  trap "rm -rf '$scratch'" EXIT
  log "building checkpointctl $CHECKPOINTCTL_VERSION (log: $ENV_LOG_DIR/cri-tools.log)"
  module_copy "$go" "$module@$CHECKPOINTCTL_VERSION" "$scratch/src"
  (
    cd "$scratch/src"
    CGO_ENABLED=0 "$go" build -mod=mod -trimpath -ldflags "-X main.name=checkpointctl -X main.version=${CHECKPOINTCTL_VERSION#v}" -o "$scratch/checkpointctl" .
  ) </dev/null >>"$ENV_LOG_DIR/cri-tools.log" 2>&1 || die "building checkpointctl failed; see $ENV_LOG_DIR/cri-tools.log"
  mkdir -p "$BIN_DIR"
  install -m 0755 "$scratch/checkpointctl" "$BIN_DIR/checkpointctl"
  echo "$CHECKPOINTCTL_VERSION" >"$BIN_DIR/.checkpointctl-version"
  log "installed checkpointctl $CHECKPOINTCTL_VERSION in $BIN_DIR"
}

CRICTL_LINK="/usr/local/bin/crictl"

link_crictl() {
  if ! command -v crictl >/dev/null && [[ ! -e "$CRICTL_LINK" ]]; then
    ln -s "$BIN_DIR/crictl" "$CRICTL_LINK"
    mkdir -p "$ENV_STATE_DIR"
    echo "$CRICTL_LINK" >"$ENV_STATE_DIR/crictl-link-installed"
    log "linked $CRICTL_LINK to $BIN_DIR/crictl"
  fi
}

main() {
  local wanted=(crictl critest ginkgo) missing=() tool check=0 link=0
  case "${1:-}" in
    --check) check=1; shift ;;
    --link) link=1; shift ;;
  esac
  case "${1:-}" in
    "") ;;
    crictl) wanted=(crictl) ;;
    checkpointctl) wanted=(checkpointctl) ;;
    *) die "usage: install-cri-tools.sh [--check|--link] [crictl|checkpointctl]" ;;
  esac
  mkdir -p "$ENV_LOG_DIR"
  # --check only looks: it neither builds nor waits for a build.
  ((check)) || tool_lock cri-tools
  for tool in "${wanted[@]}"; do
    installed "$tool" || missing+=("$tool")
  done
  if ((${#missing[@]} > 0)); then
    ((check)) && return 1
    if [[ "${missing[*]}" == checkpointctl ]]; then
      build_checkpointctl "$(find_go "checkpointctl $CHECKPOINTCTL_VERSION")"
    else
      build_tools "$(find_go "cri-tools $CRI_TOOLS_VERSION")" "${missing[@]}"
    fi
  fi
  ((link)) && link_crictl
  return 0
}

main "$@"
