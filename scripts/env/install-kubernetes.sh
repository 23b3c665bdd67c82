#!/usr/bin/env bash
# Builds the Kubernetes binaries cridock is tested with, once per version,
# into ${CRIDOCK_TOOLS_DIR:-/var/cache/cridock-tools}:
#
#   kubernetes/$KUBERNETES_VERSION/bin/  kubeadm kube-apiserver kube-controller-manager
#                                        kube-scheduler kube-proxy kubectl kubelet etcd
#   coredns/$COREDNS_VERSION/bin/coredns
#   bin/kubelet                          a link to the current release's kubelet
#                                        (a developer's kubelet at hand; no suite reads it)
#
# k8s.io/kubernetes is not meant to be required as a module: its go.mod
# replaces every k8s.io staging module with a directory of its own repo
# (`=> ./staging/src/...`), and those replaces do not apply to a dependent.
# A scratch module that requires it and replaces each of those staging
# modules with the published module at the matching v0.x.y makes `go build`
# of its commands work with Go's default settings. All seven commands and etcd
# (go.etcd.io/etcd/server/v3, whose version k8s.io/kubernetes' own go.mod
# pins) build in ONE `go build` so each shared package compiles once. etcd
# must be the one kubeadm of that minor deploys (ETCD_VERSION): when the
# module graph holds another (v1.38.0-beta.0 requires etcd v3.7.3 while its
# kubeadm deploys 3.7.1-0), etcd builds at kubeadm's version in a scratch
# module of its own, as CoreDNS does. The
# version ldflags are those of upstream's hack/lib/version.sh: kubeadm reads
# `kubelet --version`, and clients show the server's version from them.
#
# CoreDNS is its own module (github.com/coredns/coredns at a tag, no
# replaces), built in a scratch module of its own so its dependency versions
# never move the Kubernetes graph.
#
# Each version has a lock of its own (kubernetes-VERSION, and
# coredns-VERSION): a build of the next release's half hour never holds up a
# suite that wants the current or the previous release's binaries in place.
#
# Usage: install-kubernetes.sh [--with-tests]
#   build what is missing (quiet when nothing is); --with-tests also builds
#   the conformance suites' binaries (scripts/env/install-kubernetes-tests.sh),
#   which CI's run does not need.
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source=scripts/env/kubernetes-module.sh
source "$(dirname "${BASH_SOURCE[0]}")/kubernetes-module.sh"

COMMANDS=(kubeadm kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl kubelet)
ETCD_PACKAGE="go.etcd.io/etcd/server/v3"
COREDNS_MODULE="github.com/coredns/coredns"
# One per version: two versions may build at once.
BUILD_LOG="$ENV_LOG_DIR/kubernetes-$KUBERNETES_VERSION-build.log"

# kubernetes_complete: every binary there and the stamp written after them.
kubernetes_complete() {
  local name
  [[ -f "$KUBERNETES_BIN_DIR/.complete" && "$(cat "$KUBERNETES_BIN_DIR/.complete")" == "$KUBERNETES_VERSION" ]] || return 1
  for name in "${COMMANDS[@]}" etcd; do
    [[ -x "$KUBERNETES_BIN_DIR/$name" ]] || return 1
  done
}

coredns_complete() {
  [[ -x "$COREDNS_BIN_DIR/coredns" && -f "$COREDNS_BIN_DIR/.complete" ]]
}

build_kubernetes() {
  local go="$1" scratch packages=() name started graph_etcd
  scratch="$(mktemp -d /tmp/cridock-kubernetes.XXXXXX)"
  # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
  trap "rm -rf '$scratch'" EXIT
  log "building Kubernetes $KUBERNETES_VERSION (${COMMANDS[*]}) and etcd: 20-40 minutes cold on 2 cores; log: $BUILD_LOG"
  started="$SECONDS"
  write_kubernetes_module "$go" "$scratch"
  for name in "${COMMANDS[@]}"; do packages+=("$MODULE/cmd/$name"); done
  mkdir -p "$scratch/out"
  (cd "$scratch" && "$go" mod tidy) </dev/null >>"$BUILD_LOG" 2>&1 || die "go mod tidy of the Kubernetes build module failed; see $BUILD_LOG"
  graph_etcd="$(cd "$scratch" && "$go" list -m -f '{{.Version}}' "$ETCD_PACKAGE")" ||
    die "the Kubernetes build module holds no $ETCD_PACKAGE"
  # etcd's version must be the one kubeadm deploys (constants.DefaultEtcdVersion, "3.7.0-0" in 1.37).
  if [[ "$graph_etcd" == "v${ETCD_VERSION%-*}" ]]; then
    packages+=("$ETCD_PACKAGE")
  else
    log "the module graph holds etcd $graph_etcd, kubeadm $KUBERNETES_VERSION deploys ${ETCD_VERSION%-*}: etcd builds on its own"
  fi
  (
    cd "$scratch"
    CGO_ENABLED=0 "$go" build -trimpath -tags providerless -ldflags "$(version_ldflags)" -o "$scratch/out/" "${packages[@]}"
  ) </dev/null >>"$BUILD_LOG" 2>&1 || die "building Kubernetes failed; see $BUILD_LOG"
  if [[ "$graph_etcd" == "v${ETCD_VERSION%-*}" ]]; then
    # A main package whose path ends in a major version (…/server/v3) is named after the element before it.
    mv "$scratch/out/server" "$scratch/out/etcd"
  else
    build_etcd "$go" "$scratch/out/etcd"
  fi
  "$scratch/out/kubelet" --version | grep -qx "Kubernetes $KUBERNETES_VERSION" ||
    die "the built kubelet reports '$("$scratch/out/kubelet" --version)', not $KUBERNETES_VERSION"
  # The output is taken whole before it is searched: grep -q leaves at its
  # first match, and under pipefail the writer's SIGPIPE then failed the check.
  grep -qx "etcd Version: ${ETCD_VERSION%-*}" <<<"$("$scratch/out/etcd" --version)" ||
    die "the built etcd reports '$("$scratch/out/etcd" --version | head -n 1)', not ${ETCD_VERSION%-*}"
  rm -rf "$KUBERNETES_BIN_DIR.new"
  mkdir -p "$KUBERNETES_BIN_DIR.new"
  for name in "${COMMANDS[@]}" etcd; do
    install -m 0755 "$scratch/out/$name" "$KUBERNETES_BIN_DIR.new/$name"
  done
  echo "$KUBERNETES_VERSION" >"$KUBERNETES_BIN_DIR.new/.complete"
  rm -rf "$KUBERNETES_BIN_DIR"
  mkdir -p "$(dirname "$KUBERNETES_BIN_DIR")"
  mv "$KUBERNETES_BIN_DIR.new" "$KUBERNETES_BIN_DIR"
  rm -rf "$scratch"
  trap - EXIT
  log "installed Kubernetes $KUBERNETES_VERSION and etcd in $KUBERNETES_BIN_DIR ($((SECONDS - started)) s)"
}

# write_requiring_module GO DIR NAME MODULE VERSION: DIR/go.mod of a scratch
# module that requires MODULE at VERSION alone, at the Go version MODULE's own
# go.mod asks for: what builds one command of it with its published graph.
write_requiring_module() {
  local go="$1" dir="$2" name="$3" module="$4" version="$5" gomod
  gomod="$(go_mod_file "$go" "$module@$version")"
  [[ -n "$gomod" && -f "$gomod" ]] || die "go mod download $module@$version gave no go.mod"
  {
    echo "module cridock.local/$name"
    echo
    sed -n 's/^go \(.*\)$/go \1/p' "$gomod" | head -n 1
    echo
    echo "require $module $version"
  } >"$dir/go.mod"
}

# build_etcd GO OUT: etcd's server at kubeadm's version (ETCD_VERSION), in a
# scratch module that requires it alone (etcd's own go.mod replaces its
# sibling modules with directories, which a dependent does not see: it
# takes the versions that go.mod requires, as k8s.io/kubernetes does).
build_etcd() {
  local go="$1" out="$2" version="v${ETCD_VERSION%-*}" dir
  dir="$(mktemp -d /tmp/cridock-etcd.XXXXXX)"
  write_requiring_module "$go" "$dir" etcd-build "$ETCD_PACKAGE" "$version"
  printf 'package main\n\nimport _ "%s/etcdmain"\n\nfunc main() {}\n' "$ETCD_PACKAGE" >"$dir/main.go"
  (
    cd "$dir"
    "$go" mod tidy
    CGO_ENABLED=0 "$go" build -trimpath -ldflags "-s -w" -o "$out" "$ETCD_PACKAGE"
  ) </dev/null >>"$BUILD_LOG" 2>&1 || { rm -rf "$dir"; die "building etcd $version failed; see $BUILD_LOG"; }
  rm -rf "$dir"
}

build_coredns() {
  local go="$1" scratch started
  scratch="$(mktemp -d /tmp/cridock-coredns.XXXXXX)"
  # shellcheck disable=SC2064  # expand now
  trap "rm -rf '$scratch'" EXIT
  log "building CoreDNS $COREDNS_VERSION (log: $BUILD_LOG)"
  started="$SECONDS"
  write_requiring_module "$go" "$scratch" coredns-build "$COREDNS_MODULE" "$COREDNS_VERSION"
  # coremain plus the generated plugin list is what CoreDNS' own main imports.
  printf 'package main\n\nimport (\n\t_ "%s/core/plugin"\n\t_ "%s/coremain"\n)\n\nfunc main() {}\n' \
    "$COREDNS_MODULE" "$COREDNS_MODULE" >"$scratch/main.go"
  (
    cd "$scratch"
    "$go" mod tidy
    CGO_ENABLED=0 "$go" build -trimpath -ldflags "-s -w" -o "$scratch/coredns" "$COREDNS_MODULE"
  ) </dev/null >>"$BUILD_LOG" 2>&1 || die "building CoreDNS failed; see $BUILD_LOG"
  grep -qx "CoreDNS-${COREDNS_VERSION#v}" <<<"$("$scratch/coredns" -version)" ||
    die "the built CoreDNS reports '$("$scratch/coredns" -version | head -n 1)', not $COREDNS_VERSION"
  mkdir -p "$COREDNS_BIN_DIR"
  install -m 0755 "$scratch/coredns" "$COREDNS_BIN_DIR/coredns"
  echo "$COREDNS_VERSION" >"$COREDNS_BIN_DIR/.complete"
  rm -rf "$scratch"
  trap - EXIT
  log "installed CoreDNS $COREDNS_VERSION in $COREDNS_BIN_DIR ($((SECONDS - started)) s)"
}

# $CRIDOCK_TOOLS_DIR/bin/kubelet, beside crictl: the current release's
# kubelet, never the one a lane of another release builds.
link_kubelet() {
  local link="$CRIDOCK_TOOLS_DIR/bin/kubelet"
  [[ "$KUBERNETES_VERSION" == "$KUBERNETES_CURRENT_VERSION" ]] || return 0
  mkdir -p "$CRIDOCK_TOOLS_DIR/bin"
  [[ "$(readlink "$link" 2>/dev/null)" == "$KUBERNETES_BIN_DIR/kubelet" ]] && return 0
  ln -sfn "$KUBERNETES_BIN_DIR/kubelet" "$link"
}

main() {
  local with_tests=false
  case "${1:-}" in
    "") ;;
    --with-tests) with_tests=true; shift ;;
    *) die "usage: install-kubernetes.sh [--with-tests]" ;;
  esac
  (($# == 0)) || die "usage: install-kubernetes.sh [--with-tests]"
  mkdir -p "$ENV_LOG_DIR"
  tool_lock "kubernetes-$KUBERNETES_VERSION"
  local go=""
  if ! kubernetes_complete; then
    go="$(find_go "Kubernetes $KUBERNETES_VERSION")"
    build_kubernetes "$go"
  fi
  link_kubelet
  # Two minors may deploy the same CoreDNS.
  tool_lock "coredns-$COREDNS_VERSION"
  if ! coredns_complete; then
    [[ -n "$go" ]] || go="$(find_go "CoreDNS $COREDNS_VERSION")"
    build_coredns "$go"
  fi
  if "$with_tests"; then
    "$(dirname "${BASH_SOURCE[0]}")/install-kubernetes-tests.sh"
  fi
}

main "$@"
