#!/usr/bin/env bash
# The cgroup v2 test node: a Debian VM with systemd as PID 1, for the
# suites that need what this host is not (cgroup v2, systemd, kubelet's
# systemd cgroup driver; DESIGN.md "Nodes", docs/testing.md "The cgroup v2
# node"). Made from Debian packages only, booted under qemu with TCG (no
# KVM assumed), reached over ssh on a port of 127.0.0.1; the guest reaches
# nothing else (qemu's user network with restrict=on) but the host's mirror
# registry (VM_HOST_ADDR below), so what it needs is in its image, copied
# in, or pulled from that registry.
#
#   vm/node.sh image             builds the disk image, kernel and initrd
#                                unless the tools cache holds them for the
#                                same inputs (about 15 minutes when it builds)
#   vm/node.sh start NAME        a copy-on-write overlay of the image, booted;
#                                returns once ssh answers (bounded wait)
#   vm/node.sh ssh NAME [CMD...] runs CMD as root in the guest (its shell
#                                reads CMD, as with ssh); exits with CMD's status
#   vm/node.sh copy NAME SRC DST copies the host file or directory SRC to the
#                                guest path DST (a file or a directory made
#                                there), through a read-only 9p share
#   vm/node.sh reboot NAME [--crash]
#                                reboots the guest on the same overlay and
#                                waits for its ssh: `systemctl reboot`, or with
#                                --crash sysrq's immediate reboot (no sync, no
#                                unmount, no unit stopped: a power loss as the
#                                guest sees it)
#   vm/node.sh engine NAME ENGINE
#                                switches the guest's dockerd to ENGINE
#                                (vm/engine.sh: distro, docker29 or
#                                docker29-containerd) and restarts it
#   vm/node.sh stop NAME|--all   powers the guest off (killed after a bounded
#                                wait) and removes its overlay
#   vm/node.sh status            the image, and each VM with its pid, port and
#                                whether ssh answers
#
# NAME is [a-z0-9-], up to 32 characters. Environment:
#   CRIDOCK_VM_MEMORY_MB    guest memory (default 2048)
#   CRIDOCK_VM_BOOT_TIMEOUT seconds start and reboot wait for ssh at most,
#                           while the guest's console still prints
#                           (default 900)
#   CRIDOCK_VM_BOOT_SILENCE seconds of a console with nothing new after which
#                           a boot is stuck (default 300)
#   CRIDOCK_VM_BOOT_RETRIES how many times a boot that is stuck, whose
#                           console shows a kernel panic or oops, or whose
#                           qemu aborted or faulted by itself, is tried
#                           again (default 2)
#   CRIDOCK_VM_DEBIAN       the guest's Debian release: trixie (Debian 13,
#                           the default) or bookworm (Debian 12); each has
#                           its own image
#   CRIDOCK_VM_ENGINE       the engine a freshly started guest runs
#                           (vm/engine.sh): distro (its docker.io, the
#                           default), docker29 or docker29-containerd
#   CRIDOCK_VM_TCG_THREAD   qemu's TCG threads: multi (the default) or single
#   CRIDOCK_VM_NICE         the nice value of qemu's session, which is a
#                           scheduling group of its own (default 10)
#   CRIDOCK_VM_MIRROR       the Debian mirror the image is built from
#                           (default: the one this host's apt uses)
#   CRIDOCK_VM_SECURITY_MIRROR  the security suite's (default: this host's;
#                           empty for none)
#
# Files: the image in $CRIDOCK_TOOLS_DIR/vm-node/<key>/ (the key hashes every
# input: packages, the build steps, kernel command line, mirrors, ssh key),
# the ssh key pair in $CRIDOCK_TOOLS_DIR/vm-node/ssh/, overlays in
# /var/lib/cridock-env/vm/NAME/, pid and port files in /run/cridock-env/
# (vm-NAME.pid, vm-NAME.port, vm-NAME.boot.json for the boot's watch), logs
# in /var/log/cridock-env/ (vm-image.log, vm-NAME.log for qemu,
# vm-NAME-console.log for the guest's serial console).
#
# A boot that fails (start, reboot) ends with one line on stderr,
# `vm-node: NAME did not boot: REASON`: the console silent too long, a
# kernel panic or qemu's own crash (after their tries), qemu's exit
# otherwise, or no ssh by the hard cap.
# The boot's watch (vm/boot-progress.ts) runs with the repository's
# node_modules (npm ci); without them start and reboot wait by time alone.
# image needs none.
set -euo pipefail

# This file is the command line: usage, the arguments' checks, dispatch.
# The work is in the files it sources: image.sh (the guest image), host.sh
# (what the host needs: its packages, qemu 10), boot.sh (qemu's launch and
# the wait for ssh), lifecycle.sh (ssh, start, reboot, stop, copy, status)
# and engine.sh (the guest's Docker engine).

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../env/common.sh"

vm_log() { printf 'vm-node: %s\n' "$*" >&2; }

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

check_name() {
  [[ "$1" =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]] || die "VM name '$1' must be [a-z0-9-], up to 32 characters"
}

# shellcheck source=scripts/vm/image.sh
source "$(dirname "${BASH_SOURCE[0]}")/image.sh"
# shellcheck source=scripts/vm/host.sh
source "$(dirname "${BASH_SOURCE[0]}")/host.sh"
# shellcheck source=scripts/vm/boot.sh
source "$(dirname "${BASH_SOURCE[0]}")/boot.sh"
# shellcheck source=scripts/vm/lifecycle.sh
source "$(dirname "${BASH_SOURCE[0]}")/lifecycle.sh"
# shellcheck source=scripts/vm/engine.sh
source "$(dirname "${BASH_SOURCE[0]}")/engine.sh"

main() {
  local command="${1:-}"
  (($# > 0)) && shift
  case "$command" in
    image)
      require_root
      ensure_vm_host
      image_dir
      echo "$VM_IMAGE_DIR"
      ;;
    start) (($# == 1)) || usage; require_root; cmd_start "$1" ;;
    ssh) (($# >= 1)) || usage; check_name "$1"; vm_ssh "$@" ;;
    copy) (($# == 3)) || usage; check_name "$1"; cmd_copy "$@" ;;
    engine) (($# == 2)) || usage; require_root; check_name "$1"; switch_engine "$1" "$2" ;;
    stop) (($# == 1)) || usage; require_root; cmd_stop "$1" ;;
    reboot) (($# == 1 || $# == 2)) || usage; require_root; check_name "$1"; cmd_reboot "$@" ;;
    status) cmd_status ;;
    # Internal: build_image runs this (through image.sh, run) in a private mount namespace.
    _chroot-install)
      # A release other than bookworm keeps apt's archives in a folder of its
      # own: apt-get autoclean in its chroot would drop bookworm's packages.
      if [[ "$VM_DEBIAN_SUITE" != bookworm ]]; then VM_CACHE_DIR="$VM_CACHE_DIR/$VM_DEBIAN_SUITE"; fi
      install_guest_packages "$1"
      configure_guest_suite "$1"
      ;;
    *) usage ;;
  esac
}

main "$@"
