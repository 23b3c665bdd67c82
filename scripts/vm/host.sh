# What this host needs to build and run the cgroup v2 test node: the
# Debian packages of VM_HOST_PACKAGES (scripts/env/common.sh) and a qemu of
# at least VM_QEMU_MIN_VERSION. Sourced by scripts/vm/node.sh, after
# scripts/env/common.sh and image.sh (host_apt_sources).
#
# Why qemu 10: the node's guests run two vCPUs under multi-threaded TCG,
# one host thread each. Under Debian 12's qemu 7.2 a Debian 13 guest's
# kernel (6.12) oopsed on int3 where it had just patched its own code
# (a static key flipped while the other vCPU ran that code: "Oops: int3"
# in dequeue_entities 265 s into a pods test, in __schedule 430 s into a
# checkpoint test, in sched_clock_cpu 3 s into a boot), which made a
# single TCG thread necessary, at about half the speed. qemu 10.0 (Debian
# 13's own, and Debian 12's backports) ran the same guests on two threads
# through the suites that had oopsed, and runs them about three times as
# fast as 7.2 did: fork and exec of /bin/true in the guest 14 ms against 44 ms, a boot
# to ssh 28 s against 46 s (docs/testing.md, "The cgroup v2 node").

# shellcheck shell=bash

# Debian's epoch included, as dpkg compares versions.
VM_QEMU_MIN_VERSION="1:10.0"

# ensure_vm_host: the packages, and qemu new enough: from the release's
# backports suite when the release's own is older, added to apt's sources
# (VM_BACKPORTS_LIST) from the mirror that serves the release to this host.
ensure_vm_host() {
  install_missing_packages "${VM_HOST_PACKAGES[@]}"
  qemu_new_enough && return 0
  local codename release_candidate
  codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
  [[ -n "$codename" ]] || die "no VERSION_CODENAME in /etc/os-release: cannot find a qemu >= $VM_QEMU_MIN_VERSION for this host"
  release_candidate="$(apt-cache policy qemu-system-x86 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')"
  if [[ -n "$release_candidate" && "$release_candidate" != "(none)" ]] &&
    dpkg --compare-versions "$release_candidate" ge "$VM_QEMU_MIN_VERSION"; then
    install_packages qemu-system-x86
  else
    add_backports_source "$codename"
    install_packages --release "$codename-backports" qemu-system-x86
  fi
  qemu_new_enough || die "qemu-system-x86 $(qemu_version) is installed, $VM_QEMU_MIN_VERSION or later is needed (see $ENV_LOG_DIR/apt.log)"
  log "qemu-system-x86 $(qemu_version) installed"
}

qemu_version() {
  dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null || true
}

qemu_new_enough() {
  local status version
  read -r status version < <(dpkg-query -W -f='${db:Status-Status} ${Version}\n' qemu-system-x86 2>/dev/null || true)
  [[ "$status" == installed ]] && dpkg --compare-versions "$version" ge "$VM_QEMU_MIN_VERSION"
}

# add_backports_source CODENAME: CODENAME-backports from the mirror that
# serves CODENAME to this host, unless apt has that suite already.
add_backports_source() {
  local codename="$1" sources mirror
  sources="$(host_apt_sources)"
  awk -v s="$codename-backports" '$2 == s { found = 1 } END { exit !found }' <<<"$sources" && return 0
  mirror="$(awk -v s="$codename" '$2 == s { print $1; exit }' <<<"$sources")"
  [[ -n "$mirror" ]] || die "no apt source of this host serves $codename: cannot add $codename-backports for qemu >= $VM_QEMU_MIN_VERSION"
  printf '# Added by the cridock test environment for qemu (scripts/vm/host.sh).\ndeb %s %s-backports main\n' "$mirror" "$codename" >"$VM_BACKPORTS_LIST"
  log "added $codename-backports from $mirror to apt's sources ($VM_BACKPORTS_LIST)"
}
