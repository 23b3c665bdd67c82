#!/usr/bin/env bash
# Installs cridock on this node, as root: the npm package (global, runtime
# dependencies only), the systemd units (cridock.socket, cridock.service),
# /etc/default/cridock for flags, and the default CNI network (bridge cni0,
# 10.88.0.0/16, from scripts/cni/) only where the CNI config directory holds
# no network. Everything it adds is listed in a manifest that
# scripts/uninstall.sh reads, so uninstall removes exactly that.
#
# Usage: scripts/install.sh [PACKAGE.tgz]   (default: npm pack of this checkout)
# Then:  systemctl daemon-reload && systemctl enable --now cridock.socket cridock.service
#
# Overrides, for tests and unusual layouts (defaults in parentheses):
#   CRIDOCK_PREFIX     npm global prefix              ($(npm prefix -g))
#   SYSTEMD_UNIT_DIR   where the units go             (/etc/systemd/system)
#   CRIDOCK_DEFAULTS   the flags file                 (/etc/default/cridock)
#   CNI_CONF_DIR       CNI network configs            (/etc/cni/net.d)
#   CRIDOCK_MANIFEST   what was installed             (/var/lib/cridock/install-manifest)
#   CRIDOCK_OCI_LAYER  "no": leave dockerd's daemon.json alone (yes: `cridock oci-layer install`,
#                      which registers cridock's OCI runtime layer and reloads dockerd with SIGHUP)
#   CRIDOCK_OCI_LAYER_FLAGS  more flags for `cridock oci-layer install|uninstall` (another daemon.json, ...)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UNIT_DIR="${SYSTEMD_UNIT_DIR:-/etc/systemd/system}"
DEFAULTS_FILE="${CRIDOCK_DEFAULTS:-/etc/default/cridock}"
CNI_DIR="${CNI_CONF_DIR:-/etc/cni/net.d}"
MANIFEST="${CRIDOCK_MANIFEST:-/var/lib/cridock/install-manifest}"

say() { printf 'cridock-install: %s\n' "$*" >&2; }
die() { printf 'cridock-install: error: %s\n' "$*" >&2; exit 1; }

[[ "$(id -u)" == 0 ]] || die "run this as root"
# The oldest Node line cridock supports and is tested on: package.json's engines (">=N").
floor="$(sed -n 's/^ *"node": ">=\([0-9]*\)".*/\1/p' "$repo_root/package.json")"
[[ "$floor" =~ ^[0-9]+$ ]] || die "cannot read the Node floor from $repo_root/package.json's engines"
command -v node >/dev/null || die "node ($floor or newer) is not installed (or install the Debian package or the tarball: their executable carries its own Node)"
command -v npm >/dev/null || die "npm is not installed"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
((node_major >= floor)) || die "node $(node --version) is too old: cridock supports Node $floor or newer (or install the Debian package or the tarball: their executable carries its own Node)"
PREFIX="${CRIDOCK_PREFIX:-$(npm prefix -g 2>/dev/null)}"
[[ "$PREFIX" == /* ]] || die "cannot tell npm's global prefix (got '$PREFIX'); set CRIDOCK_PREFIX"

work="$(mktemp -d /tmp/cridock-install.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# 1. The package: the tarball given, or one packed from this checkout.
tarball="${1:-}"
if [[ -z "$tarball" ]]; then
  say "packing $repo_root"
  tarball="$work/$(cd "$repo_root" && npm pack --silent --pack-destination "$work" | tail -n 1)"
fi
[[ -f "$tarball" ]] || die "package $tarball not found"
say "installing $(basename "$tarball") under $PREFIX"
# --prefer-offline: dependencies come from npm's cache when it has them.
npm install --global --prefix "$PREFIX" --omit=dev --prefer-offline --no-audit --no-fund --loglevel=error "$tarball" >&2 ||
  die "npm install of $tarball failed"
bin="$PREFIX/bin/cridock"
[[ -x "$bin" ]] || die "npm installed no $bin"
"$bin" --version >/dev/null || die "$bin does not run"

mkdir -p "$(dirname "$MANIFEST")"
: >"$MANIFEST.new"
record() { printf '%s\n' "$1" >>"$MANIFEST.new"; }
record "package $PREFIX"

# 2. The units, with ExecStart pointing at the installed command. systemd's
#    PATH may lack node's directory, so the command is `node cridock.js`
#    with both paths absolute.
mkdir -p "$UNIT_DIR"
node_bin="$(command -v node)"
entry="$(readlink -f "$bin")"
install -m 0644 "$repo_root/packaging/systemd/cridock.socket" "$UNIT_DIR/cridock.socket"
sed "s#^ExecStart=/usr/local/bin/cridock #ExecStart=$node_bin $entry #" \
  "$repo_root/packaging/systemd/cridock.service" >"$UNIT_DIR/cridock.service"
chmod 0644 "$UNIT_DIR/cridock.service"
record "file $UNIT_DIR/cridock.socket"
record "file $UNIT_DIR/cridock.service"

# 3. The flags file, only when there is none (it is the operator's).
if [[ ! -e "$DEFAULTS_FILE" ]]; then
  mkdir -p "$(dirname "$DEFAULTS_FILE")"
  cat >"$DEFAULTS_FILE" <<'DEFAULTS'
# Flags for cridock.service (see `cridock --help`), e.g.
# CRIDOCK_OPTS="--metrics-bind-addr=9101 --pod-infra-container-image=registry.k8s.io/pause:3.10.2"
CRIDOCK_OPTS=""
DEFAULTS
  record "file $DEFAULTS_FILE"
fi

# 4. The default CNI network, only where no network config exists.
mkdir -p "$CNI_DIR"
if [[ -z "$(find "$CNI_DIR" -maxdepth 1 -type f \( -name '*.conf' -o -name '*.conflist' -o -name '*.json' \) -print -quit)" ]]; then
  for file in "$repo_root"/scripts/cni/*; do
    install -m 0644 "$file" "$CNI_DIR/$(basename "$file")"
    record "file $CNI_DIR/$(basename "$file")"
  done
  say "installed the default CNI network (bridge cni0, 10.88.0.0/16) in $CNI_DIR"
else
  say "$CNI_DIR already holds a network config; left as it is"
fi

# 5. The OCI runtime layer: cgroup v2 unified settings in force from a
#    container's first instruction (docs/node-features.md). Never fatal: cridock
#    works without it and says what the node then lacks.
if [[ "${CRIDOCK_OCI_LAYER:-yes}" != no ]]; then
  # shellcheck disable=SC2086 # the flags are words
  if "$bin" oci-layer install ${CRIDOCK_OCI_LAYER_FLAGS:-} >&2; then
    record "oci-layer"
  else
    say "the OCI runtime layer was not registered (above); cridock works without it"
  fi
fi
mv "$MANIFEST.new" "$MANIFEST"

if [[ -d /run/systemd/system && "$UNIT_DIR" == /etc/systemd/system ]]; then
  systemctl daemon-reload
fi
say "installed: $bin, $UNIT_DIR/cridock.{socket,service}"
say "next: cridock check && systemctl enable --now cridock.socket cridock.service"
