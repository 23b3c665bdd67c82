# Shared by install-kubernetes.sh and install-kubernetes-tests.sh (sourced,
# not run): the scratch module that requires k8s.io/kubernetes with each of
# its staging modules replaced by the published module, and the version
# ldflags upstream's hack/lib/version.sh sets. Needs env/common.sh first.

# shellcheck shell=bash
# shellcheck disable=SC2034  # constants for the scripts that source this file

MODULE="k8s.io/kubernetes"

# staging_modules GOMOD: the module paths that GOMOD replaces with ./staging/ dirs.
staging_modules() {
  sed -n 's#^[[:space:]]*\([^[:space:]]*\) => \./staging/.*$#\1#p' "$1"
}

# The staging modules are published as v0.MINOR.PATCH of v1.MINOR.PATCH.
staging_version() {
  echo "v0.${KUBERNETES_VERSION#v1.}"
}

version_ldflags() {
  local version="$KUBERNETES_VERSION" major minor key val flags=()
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

# go_mod_file GO MODULE@VERSION: the path of that module's go.mod in the module cache.
go_mod_file() {
  "$1" mod download -json "$2" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p'
}

# kubernetes_required_version GO MODULE: the version of MODULE that
# k8s.io/kubernetes' go.mod requires (the one kubelet and the suites link).
kubernetes_required_version() {
  local gomod version
  gomod="$(go_mod_file "$1" "$MODULE@$KUBERNETES_VERSION")"
  version="$(sed -n "s#^[[:space:]]*$2 \(v[^[:space:]]*\).*#\1#p" "$gomod" | head -n 1)"
  [[ -n "$version" ]] || die "$MODULE@$KUBERNETES_VERSION's go.mod requires no $2"
  echo "$version"
}

# write_kubernetes_module GO DIR: the scratch module's go.mod and a main.go
# whose blank imports keep `go mod tidy` from dropping what the build needs.
write_kubernetes_module() {
  local go="$1" dir="$2" gomod staging mod
  gomod="$(go_mod_file "$go" "$MODULE@$KUBERNETES_VERSION")"
  [[ -n "$gomod" && -f "$gomod" ]] || die "go mod download $MODULE@$KUBERNETES_VERSION gave no go.mod"
  staging="$(staging_version)"
  {
    echo "module cridock.local/kubernetes-build"
    echo
    sed -n 's/^go \(.*\)$/go \1/p' "$gomod" | head -n 1
    echo
    echo "require $MODULE $KUBERNETES_VERSION"
    echo
    echo "replace ("
    while read -r mod; do
      echo "	$mod => $mod $staging"
    done < <(staging_modules "$gomod")
    echo ")"
  } >"$dir/go.mod"
  {
    printf 'package main\n\nimport (\n'
    for mod in kubeadm kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet; do
      printf '\t_ "%s/cmd/%s/app"\n' "$MODULE" "$mod"
    done
    printf '\t_ "k8s.io/kubectl/pkg/cmd"\n'
    printf '\t_ "go.etcd.io/etcd/server/v3/etcdmain"\n'
    printf ')\n\nfunc main() {}\n'
  } >"$dir/main.go"
}
