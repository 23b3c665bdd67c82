#!/usr/bin/env bash
# Builds kubelet (k8s.io/kubernetes $KUBELET_VERSION) with Go into
# ${CRIDOCK_TOOLS_DIR:-/var/cache/cridock-tools}/bin, unless a version stamp
# says it is there already. The e2e suite and the kubelet bench drive cridock
# with it.
#
# k8s.io/kubernetes is not meant to be required as a module: its go.mod
# replaces every k8s.io staging module with a directory of its own repo
# (`=> ./staging/src/...`), and those replaces do not apply to a dependent.
# A scratch module that requires it and replaces each of those staging
# modules with the published module at the matching v0.x.y makes
# `go build k8s.io/kubernetes/cmd/kubelet` work with Go's default settings.
# The version ldflags are those of upstream's hack/lib/version.sh, so that
# `kubelet --version` prints the real version.
set -euo pipefail

# shellcheck source=scripts/lib/env-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/env-common.sh"

BIN_DIR="$CRIDOCK_TOOLS_DIR/bin"
STAMP="$BIN_DIR/.kubelet-version"
MODULE="k8s.io/kubernetes"

already_installed() {
  [[ -x "$BIN_DIR/kubelet" && -f "$STAMP" && "$(cat "$STAMP")" == "$KUBELET_VERSION" ]]
}

# staging_modules GOMOD: the module paths that GOMOD replaces with ./staging/ dirs.
staging_modules() {
  sed -n 's#^[[:space:]]*\([^[:space:]]*\) => \./staging/.*$#\1#p' "$1"
}

# The staging modules are published as v0.MINOR.PATCH of v1.MINOR.PATCH.
staging_version() {
  echo "v0.${KUBELET_VERSION#v1.}"
}

version_ldflags() {
  local version="$KUBELET_VERSION" major minor key val flags=()
  major="${version#v}"; major="${major%%.*}"
  minor="${version#v*.}"; minor="${minor%%.*}"
  for key in gitVersion:"$version" gitMajor:"$major" gitMinor:"$minor" \
    gitTreeState:clean gitCommit:"" buildDate:"$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
    val="${key#*:}"; key="${key%%:*}"
    [[ -n "$val" ]] || continue
    flags+=("-X k8s.io/client-go/pkg/version.$key=$val" "-X k8s.io/component-base/version.$key=$val")
  done
  echo "-s -w ${flags[*]}"
}

build_kubelet() {
  local go="$1" scratch gomod mod staging
  scratch="$(mktemp -d /tmp/cridock-kubelet.XXXXXX)"
  # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
  trap "rm -rf '$scratch'" EXIT
  log "building kubelet $KUBELET_VERSION (10-20 minutes on 2 cores; log: $ENV_LOG_DIR/kubelet-build.log)"
  gomod="$("$go" mod download -json "$MODULE@$KUBELET_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
  [[ -n "$gomod" && -f "$gomod" ]] || die "go mod download $MODULE@$KUBELET_VERSION gave no go.mod"
  staging="$(staging_version)"
  {
    echo "module cridock.local/kubelet-build"
    echo
    sed -n 's/^go \(.*\)$/go \1/p' "$gomod" | head -n 1
    echo
    echo "require $MODULE $KUBELET_VERSION"
    echo
    echo "replace ("
    while read -r mod; do
      echo "	$mod => $mod $staging"
    done < <(staging_modules "$gomod")
    echo ")"
  } >"$scratch/go.mod"
  # One import keeps `go mod tidy` from dropping the requirement.
  printf 'package main\n\nimport _ "%s/cmd/kubelet/app"\n\nfunc main() {}\n' "$MODULE" >"$scratch/main.go"
  mkdir -p "$BIN_DIR"
  (
    cd "$scratch"
    "$go" mod tidy
    CGO_ENABLED=0 "$go" build -trimpath -tags "providerless" -ldflags "$(version_ldflags)" -o "$scratch/kubelet" "$MODULE/cmd/kubelet"
  ) </dev/null >>"$ENV_LOG_DIR/kubelet-build.log" 2>&1 || die "building kubelet failed; see $ENV_LOG_DIR/kubelet-build.log"
  "$scratch/kubelet" --version | grep -qx "Kubernetes $KUBELET_VERSION" \
    || die "the built kubelet reports '$("$scratch/kubelet" --version)', not $KUBELET_VERSION"
  install -m 0755 "$scratch/kubelet" "$BIN_DIR/kubelet"
  echo "$KUBELET_VERSION" >"$STAMP"
  log "installed kubelet $KUBELET_VERSION in $BIN_DIR"
}

main() {
  mkdir -p "$ENV_LOG_DIR"
  already_installed && return 0
  build_kubelet "$(find_go "kubelet $KUBELET_VERSION")"
}

main "$@"
