# The cgroup v2 test node's guest image: where it is made from (this
# host's apt sources), how (debootstrap, the guest's packages and
# configuration, the disk), and its key and place in the tools cache.
# Sourced by scripts/vm/node.sh, after scripts/env/common.sh; `image`,
# `start` and `status` use it (image_dir also reads VM_OVERLAY_ROOT, from
# lifecycle.sh, to keep the images running VMs rest on). Needs no
# node_modules.
#
# build_image runs this file again (`bash "${BASH_SOURCE[0]}" _chroot-install
# ROOTFS`, in a mount namespace of its own): the text of build_image is part
# of image_key, so it keeps naming itself as it did when it lived in
# node.sh, and this file, run rather than sourced, hands its arguments to
# node.sh, which dispatches _chroot-install.

# shellcheck shell=bash
# shellcheck disable=SC2034  # settings for the files node.sh sources

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  exec bash "$(dirname "${BASH_SOURCE[0]}")/node.sh" "$@"
fi

VM_CACHE_DIR="$CRIDOCK_TOOLS_DIR/vm-node"
VM_SSH_KEY="$VM_CACHE_DIR/ssh/id_ed25519"
# The guest's Debian release (CRIDOCK_VM_DEBIAN): trixie (Debian 13, the
# default: what a node installed in 2026 runs) or bookworm (Debian 12, with
# the oldest Docker supported). Each has its own image and key; the
# bookworm image's key is computed as before the choice existed.
VM_DEBIAN_SUITE="${CRIDOCK_VM_DEBIAN:-trixie}"
case "$VM_DEBIAN_SUITE" in
  bookworm | trixie) ;;
  *) die "CRIDOCK_VM_DEBIAN=$VM_DEBIAN_SUITE: bookworm or trixie wanted" ;;
esac
# A build's log; trixie's its own, so that building it leaves bookworm's.
VM_IMAGE_LOG="$ENV_LOG_DIR/vm-image.log"
if [[ "$VM_DEBIAN_SUITE" != bookworm ]]; then VM_IMAGE_LOG="$ENV_LOG_DIR/vm-image-$VM_DEBIAN_SUITE.log"; fi
VM_HOSTNAME="cridock-vm"
VM_DISK_SIZE="8G"
# root on the virtio disk, read-write from the start (no fsck, no remount),
# the console on the serial port (the console log), and a panic ends qemu
# (-no-reboot) instead of hanging until start's timeout. cgroup v2 alone is
# Debian 12's default: no systemd.unified_cgroup_hierarchy needed.
VM_KERNEL_CMDLINE="root=/dev/vda rw console=ttyS0 panic=-1"
# The initrd holds only what mounting the root disk needs (initramfs-tools'
# MODULES=list): 7 MB that TCG unpacks in a second, against 31 MB and 12 s
# for Debian's default MODULES=most.
VM_INITRD_MODULES=(virtio_pci virtio_blk virtio_net ext4)
# What the node runs: the kernel and systemd (with dbus, which Docker's and
# kubelet's systemd cgroup driver talk to, and udev), sshd, the engine
# cridock's .deb depends on with what it recommends (CNI plugins, socat,
# iproute2), iptables and conntrack for pod networking, criu (checkpoints),
# busybox-static, and procps for a look around, and libatomic1, which the
# Node inside cridock's executable links (the .deb depends on it; the guest
# reaches no Debian mirror to fetch it at install). No Recommends, as on a
# minimal server, except apparmor, which a Debian 12 install has: its kernel
# enables AppArmor, and dockerd then starts no container without
# apparmor_parser to load its docker-default profile. cridock's own .deb
# is installed by the tests.
VM_GUEST_PACKAGES=(
  linux-image-amd64 initramfs-tools zstd kmod udev
  systemd systemd-sysv dbus openssh-server ca-certificates apparmor
  docker.io containerd runc containernetworking-plugins
  iptables conntrack criu busybox-static iproute2 util-linux socat procps
  libatomic1
)
# Debian 13's docker.io no longer holds the docker command: docker-cli does,
# which docker.io only recommends.
if [[ "$VM_DEBIAN_SUITE" == trixie ]]; then VM_GUEST_PACKAGES+=(docker-cli); fi
# Timers that would wake apt, dpkg or the file system tools in the middle
# of a test, on a guest whose CPU is emulated.
VM_MASKED_UNITS=(apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer)

# host_apt_sources: "URI SUITE" for each suite of each enabled deb source of
# this host's apt with the component main (deb822 files and one-line lists
# alike), so that the image comes from the mirror this machine already uses
# and no host name is written into the repository.
host_apt_sources() {
  local file
  for file in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$file" ]] || continue
    awk '
      function flush() {
        if (types ~ /(^|[ \t])deb([ \t]|$)/ && enabled != "no" && components ~ /(^|[ \t])main([ \t]|$)/)
          for (u = 1; u <= nu; u++) for (s = 1; s <= ns; s++) print uri[u], suite[s]
        types = ""; enabled = ""; components = ""; nu = 0; ns = 0
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      tolower($1) == "types:" { types = $0; next }
      tolower($1) == "enabled:" { enabled = tolower($2); next }
      tolower($1) == "components:" { components = $0; next }
      tolower($1) == "uris:" { for (i = 2; i <= NF; i++) uri[++nu] = $i; next }
      tolower($1) == "suites:" { for (i = 2; i <= NF; i++) suite[++ns] = $i; next }
      END { flush() }
    ' "$file"
  done
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f "$file" ]] || continue
    # deb [options] URI SUITE COMPONENTS...
    sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$file" |
      awk '$1 == "deb" && NF >= 4 { for (i = 4; i <= NF; i++) if ($i == "main") { print $2, $3; break } }'
  done
}

# debian_mirrors: sets VM_MIRROR (the archive) and VM_SECURITY_MIRROR (empty
# when the host uses none) from host_apt_sources: the source of the guest's
# suite, else the first of the host's own release (not its updates,
# security or backports suites).
debian_mirrors() {
  local sources
  sources="$(host_apt_sources)"
  VM_MIRROR="${CRIDOCK_VM_MIRROR:-}"
  if [[ -z "$VM_MIRROR" ]]; then
    VM_MIRROR="$(awk -v s="$VM_DEBIAN_SUITE" '$2 == s { print $1; exit }' <<<"$sources")"
    [[ -n "$VM_MIRROR" ]] || VM_MIRROR="$(awk '$2 !~ /-security$|\/updates$|-updates$|-backports$/ { print $1; exit }' <<<"$sources")"
  fi
  [[ -n "$VM_MIRROR" ]] || die "no Debian mirror found in this host's apt sources; set CRIDOCK_VM_MIRROR"
  VM_SECURITY_MIRROR="${CRIDOCK_VM_SECURITY_MIRROR-$(awk '$2 ~ /-security$/ { print $1; exit }' <<<"$sources")}"
}

ensure_ssh_key() {
  [[ -f "$VM_SSH_KEY" && -f "$VM_SSH_KEY.pub" ]] && return 0
  mkdir -p "$(dirname "$VM_SSH_KEY")"
  chmod 0700 "$(dirname "$VM_SSH_KEY")"
  rm -f "$VM_SSH_KEY" "$VM_SSH_KEY.pub"
  ssh-keygen -q -t ed25519 -N "" -C "cridock-vm-node" -f "$VM_SSH_KEY"
  vm_log "made the ssh key pair $VM_SSH_KEY"
}

# write_guest_sources ROOTFS: the guest's apt sources, deb822 as Debian 12
# writes them: the suite and its updates from the archive mirror, the
# security suite from the security mirror when the host has one.
write_guest_sources() {
  local rootfs="$1"
  rm -f "$rootfs/etc/apt/sources.list"
  {
    printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$VM_MIRROR" "$VM_DEBIAN_SUITE" "$VM_DEBIAN_SUITE"
    if [[ -n "$VM_SECURITY_MIRROR" ]]; then
      printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$VM_SECURITY_MIRROR" "$VM_DEBIAN_SUITE"
    fi
  } >"$rootfs/etc/apt/sources.list.d/debian.sources"
}

# configure_guest ROOTFS: what makes the unpacked system this node, before
# the packages go in (the initrd is made when the kernel is installed).
configure_guest() {
  local rootfs="$1" module
  write_guest_sources "$rootfs"
  # No service starts inside the chroot; removed once the packages are in.
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
  chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
  # apt resolves the mirror through the host's resolver while building.
  cp -L /etc/resolv.conf "$rootfs/etc/resolv.conf"
  mkdir -p "$rootfs/etc/initramfs-tools/conf.d"
  printf 'MODULES=list\nRESUME=none\n' >"$rootfs/etc/initramfs-tools/conf.d/cridock-vm.conf"
  for module in "${VM_INITRD_MODULES[@]}"; do echo "$module"; done >>"$rootfs/etc/initramfs-tools/modules"
  echo "$VM_HOSTNAME" >"$rootfs/etc/hostname"
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$VM_HOSTNAME" >"$rootfs/etc/hosts"
  printf '/dev/vda\t/\text4\tdefaults\t0\t1\n' >"$rootfs/etc/fstab"
}

# install_guest_packages ROOTFS (run in a private mount namespace, by
# `vm/node.sh _chroot-install`): apt-get install in the chroot, with /proc,
# /sys and /dev for the packages' scripts and apt's archive cache kept in
# the tools cache for the next build. The mounts go with the namespace.
install_guest_packages() {
  local rootfs="$1" archives="$VM_CACHE_DIR/apt-archives"
  mkdir -p "$archives/partial"
  mount -t proc proc "$rootfs/proc"
  mount -t sysfs sysfs "$rootfs/sys"
  mount --rbind /dev "$rootfs/dev"
  mount --bind "$archives" "$rootfs/var/cache/apt/archives"
  local apt=(env DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 chroot "$rootfs" apt-get -q -y -o Dpkg::Use-Pty=0)
  "${apt[@]}" update
  "${apt[@]}" full-upgrade
  "${apt[@]}" install --no-install-recommends "${VM_GUEST_PACKAGES[@]}"
  # Drop cached packages that are no longer the mirror's versions.
  "${apt[@]}" autoclean
}

# finish_guest ROOTFS: after the packages: the network, sshd and the ssh
# key, the timers masked, the build's own traces removed.
finish_guest() {
  local rootfs="$1"
  rm -f "$rootfs/usr/sbin/policy-rc.d"
  # qemu's user network: the guest is 10.0.2.15, static (no DHCP wait);
  # 10.0.2.3 is qemu's resolver, which answers nothing under restrict=on.
  mkdir -p "$rootfs/etc/systemd/network"
  printf '[Match]\nName=en* eth*\n\n[Network]\nAddress=10.0.2.15/24\nGateway=10.0.2.2\nDNS=10.0.2.3\n' \
    >"$rootfs/etc/systemd/network/10-qemu-user.network"
  printf 'nameserver 10.0.2.3\n' >"$rootfs/etc/resolv.conf"
  systemctl --root="$rootfs" enable systemd-networkd.service >>"$VM_IMAGE_LOG" 2>&1
  systemctl --root="$rootfs" mask "${VM_MASKED_UNITS[@]}" >>"$VM_IMAGE_LOG" 2>&1
  printf 'PasswordAuthentication no\nKbdInteractiveAuthentication no\nUseDNS no\n' >"$rootfs/etc/ssh/sshd_config.d/cridock-vm.conf"
  install -d -m 0700 "$rootfs/root/.ssh"
  install -m 0600 "$VM_SSH_KEY.pub" "$rootfs/root/.ssh/authorized_keys"
  rm -rf "$rootfs/var/lib/apt/lists/partial" "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log "$rootfs/var/log/apt"
  mkdir -p "$rootfs/var/log/apt"
}

# make_disk ROOTFS OUT_DIR: the kernel and initrd beside an ext4 disk made
# straight from the directory (mke2fs -d: no loop device, no mount), in
# qcow2 so that each VM's overlay can sit on it.
make_disk() {
  local rootfs="$1" out="$2" kernel initrd
  kernel="$(find "$rootfs/boot" -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -n1)"
  [[ -n "$kernel" ]] || die "no kernel in $rootfs/boot"
  initrd="$rootfs/boot/initrd.img-${kernel##*/vmlinuz-}"
  [[ -f "$initrd" ]] || die "no initrd for $kernel"
  cp "$kernel" "$out/vmlinuz"
  cp "$initrd" "$out/initrd.img"
  nice -n 10 mke2fs -q -F -t ext4 -L "$VM_HOSTNAME" -d "$rootfs" "$out/disk.raw" "$VM_DISK_SIZE"
  nice -n 10 qemu-img convert -O qcow2 "$out/disk.raw" "$out/base.qcow2"
  rm -f "$out/disk.raw"
}

# configure_guest_suite ROOTFS: what one Debian release needs beyond the
# common steps, after its packages are in (node.sh's _chroot-install runs it
# after install_guest_packages, in the same mount namespace). Nothing for
# bookworm, whose image is made as before the choice of release existed.
configure_guest_suite() {
  local rootfs="$1"
  case "$VM_DEBIAN_SUITE" in
    bookworm) ;;
    trixie) ;;
  esac
}

# image_key: a hash of everything the image is made from. The build steps
# count as their code (declare -f prints a function without its comments,
# so a comment change does not cost a rebuild). configure_guest_suite
# counts for the releases other than bookworm only, so that bookworm's key
# stays the one it had before the choice of release.
image_key() {
  {
    declare -f host_apt_sources debian_mirrors write_guest_sources configure_guest install_guest_packages finish_guest make_disk build_image
    printf '%s\n' "$VM_DEBIAN_SUITE" "$VM_HOSTNAME" "$VM_DISK_SIZE" "$VM_KERNEL_CMDLINE" "$VM_MIRROR" "$VM_SECURITY_MIRROR"
    printf '%s\n' "${VM_INITRD_MODULES[@]}" "${VM_GUEST_PACKAGES[@]}" "${VM_MASKED_UNITS[@]}"
    cat "$VM_SSH_KEY.pub"
    if [[ "$VM_DEBIAN_SUITE" != bookworm ]]; then declare -f configure_guest_suite; fi
  } | sha256sum | cut -c1-16
}

# image_suite DIR: the Debian release of the cached image in DIR (its
# suite file; an image from before the choice of release is bookworm).
image_suite() {
  if [[ -f "$1/suite" ]]; then cat "$1/suite"; else echo bookworm; fi
}

# build_image DIR: debootstrap, packages, configuration and the disk, into
# DIR (made here, renamed into place by the caller's image step).
build_image() {
  local dir="$1" rootfs="$1/rootfs" started=$SECONDS
  mkdir -p "$dir" "$VM_CACHE_DIR/debootstrap-debs"
  vm_log "debootstrap $VM_DEBIAN_SUITE (minbase) from $VM_MIRROR (log: $VM_IMAGE_LOG)"
  # In a mount namespace of its own: the /proc and /sys debootstrap mounts
  # in the target go with it, whatever happens. Niced, as every step of the
  # build, so that the host's own work goes first.
  nice -n 10 unshare --mount --propagation private \
    debootstrap --variant=minbase --cache-dir="$VM_CACHE_DIR/debootstrap-debs" \
    "$VM_DEBIAN_SUITE" "$rootfs" "$VM_MIRROR" >>"$VM_IMAGE_LOG" 2>&1 ||
    die "debootstrap failed; see $VM_IMAGE_LOG"
  vm_log "debootstrap done after $((SECONDS - started))s; installing ${#VM_GUEST_PACKAGES[@]} packages"
  configure_guest "$rootfs"
  nice -n 10 unshare --mount --propagation private bash "${BASH_SOURCE[0]}" _chroot-install "$rootfs" >>"$VM_IMAGE_LOG" 2>&1 ||
    die "installing the guest's packages failed; see $VM_IMAGE_LOG"
  finish_guest "$rootfs"
  vm_log "packages in after $((SECONDS - started))s; making the disk ($VM_DISK_SIZE, ext4 from the directory, then qcow2)"
  make_disk "$rootfs" "$dir"
  rm -rf "$rootfs"
  vm_log "image built in $((SECONDS - started))s"
}

# image_dir: sets VM_IMAGE_DIR to the cached image for the current inputs,
# building it when absent. One build at a time (flock); the same release's
# images under other keys are removed once a new one is in place.
image_dir() {
  mkdir -p "$VM_CACHE_DIR" "$ENV_LOG_DIR"
  ensure_ssh_key
  debian_mirrors
  local key lock_fd
  key="$(image_key)"
  VM_IMAGE_DIR="$VM_CACHE_DIR/$key"
  [[ -f "$VM_IMAGE_DIR/base.qcow2" ]] && return 0
  exec {lock_fd}>"$VM_CACHE_DIR/image.lock"
  if ! flock -n "$lock_fd"; then
    vm_log "waiting for another image build to finish (up to 1 h)"
    flock -w 3600 "$lock_fd" || die "another image build held $VM_CACHE_DIR/image.lock for an hour"
  fi
  if [[ ! -f "$VM_IMAGE_DIR/base.qcow2" ]]; then
    ensure_vm_host
    local work="$VM_CACHE_DIR/build-$key"
    rm -rf "$work"
    : >"$VM_IMAGE_LOG"
    build_image "$work"
    echo "$VM_DEBIAN_SUITE" >"$work/suite"
    rm -rf "$VM_IMAGE_DIR"
    mv "$work" "$VM_IMAGE_DIR"
    local old
    for old in "$VM_CACHE_DIR"/*/base.qcow2; do
      old="$(dirname "$old")"
      [[ "$old" == "$VM_IMAGE_DIR" ]] && continue
      # Each release keeps its own image.
      [[ "$(image_suite "$old")" == "$VM_DEBIAN_SUITE" ]] || continue
      # An image a running VM's overlay still rests on stays.
      if grep -qsF "$old/base.qcow2" "$VM_OVERLAY_ROOT"/*/backing; then continue; fi
      rm -rf "$old"
      vm_log "removed the previous image $old"
    done
  fi
  exec {lock_fd}>&-
}
