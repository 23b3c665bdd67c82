#!/usr/bin/env bash
# Removes what scripts/install.sh installed, as its manifest lists it: stops
# and disables the units (when systemd runs), removes them, the flags file
# and the default CNI network if install.sh put them there, and the npm
# package. cridock's state (/var/lib/cridock: checkpoints of pods that may
# still exist) and the CRI logs are left; remove the pods first
# (crictl rmp -fa) if the node is being retired.
#
# Takes the same overrides as install.sh (CRIDOCK_MANIFEST, SYSTEMD_UNIT_DIR,
# CRIDOCK_OCI_LAYER_FLAGS).
set -euo pipefail

UNIT_DIR="${SYSTEMD_UNIT_DIR:-/etc/systemd/system}"
MANIFEST="${CRIDOCK_MANIFEST:-/var/lib/cridock/install-manifest}"

say() { printf 'cridock-uninstall: %s\n' "$*" >&2; }
die() { printf 'cridock-uninstall: error: %s\n' "$*" >&2; exit 1; }

[[ "$(id -u)" == 0 ]] || die "run this as root"
[[ -f "$MANIFEST" ]] || die "$MANIFEST not found: nothing installed by scripts/install.sh here"

if [[ -d /run/systemd/system && "$UNIT_DIR" == /etc/systemd/system ]]; then
  systemctl disable --now cridock.service cridock.socket 2>/dev/null || true
fi

# The OCI runtime layer first, while the package that unregisters it is there.
prefix="$(sed -n 's/^package //p' "$MANIFEST" | head -n1)"
if grep -qx "oci-layer" "$MANIFEST" && [[ -x "$prefix/bin/cridock" ]]; then
  # shellcheck disable=SC2086 # the flags are words
  "$prefix/bin/cridock" oci-layer uninstall ${CRIDOCK_OCI_LAYER_FLAGS:-} >&2 || say "could not unregister the OCI runtime layer (above)"
fi

while read -r kind path; do
  case "$kind" in
    file)
      rm -f -- "$path" && say "removed $path" ;;
    package)
      npm uninstall --global --prefix "$path" --loglevel=error cridock >&2 && say "removed the cridock package from $path" ;;
    oci-layer) ;;
    *) say "ignoring unknown manifest line: $kind $path" ;;
  esac
done <"$MANIFEST"
rm -f -- "$MANIFEST"

if [[ -d /run/systemd/system && "$UNIT_DIR" == /etc/systemd/system ]]; then
  systemctl daemon-reload
fi
say "done; cridock's state under /var/lib/cridock and the CRI logs were left in place"
