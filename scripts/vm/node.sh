#!/usr/bin/env bash
# The cgroup v2 test node: a Debian 12 VM with systemd as PID 1, for the
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
#   vm/node.sh stop NAME|--all   powers the guest off (killed after a bounded
#                                wait) and removes its overlay
#   vm/node.sh status            the image, and each VM with its pid, port and
#                                whether ssh answers
#
# NAME is [a-z0-9-], up to 32 characters. Environment:
#   CRIDOCK_VM_MEMORY_MB    guest memory (default 2048)
#   CRIDOCK_VM_BOOT_TIMEOUT seconds start waits for ssh (default 420)
#   CRIDOCK_VM_MIRROR       the Debian mirror the image is built from
#                           (default: the one this host's apt uses)
#   CRIDOCK_VM_SECURITY_MIRROR  the security suite's (default: this host's;
#                           empty for none)
#
# Files: the image in $CRIDOCK_TOOLS_DIR/vm-node/<key>/ (the key hashes every
# input: packages, the build steps, kernel command line, mirrors, ssh key),
# the ssh key pair in $CRIDOCK_TOOLS_DIR/vm-node/ssh/, overlays in
# /var/lib/cridock-env/vm/NAME/, pid and port files in /run/cridock-env/
# (vm-NAME.pid, vm-NAME.port), logs in /var/log/cridock-env/ (vm-image.log,
# vm-NAME.log for qemu, vm-NAME-console.log for the guest's serial console).
set -euo pipefail

# shellcheck source=scripts/env/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../env/common.sh"

VM_CACHE_DIR="$CRIDOCK_TOOLS_DIR/vm-node"
VM_SSH_KEY="$VM_CACHE_DIR/ssh/id_ed25519"
VM_OVERLAY_ROOT="$ENV_STATE_DIR/vm"
VM_IMAGE_LOG="$ENV_LOG_DIR/vm-image.log"
VM_DEBIAN_SUITE="bookworm"
VM_HOSTNAME="cridock-vm"
VM_DISK_SIZE="8G"
VM_MEMORY_MB="${CRIDOCK_VM_MEMORY_MB:-2048}"
VM_BOOT_TIMEOUT="${CRIDOCK_VM_BOOT_TIMEOUT:-420}"
# Seconds stop gives the guest's own poweroff before it kills qemu.
VM_STOP_TIMEOUT=90
# Seconds reboot waits for the guest's reset after asking for it.
VM_REBOOT_TIMEOUT=600
# Files go in through a read-only virtio-9p share of the VM's directory
# share/ (mounted in the guest at $VM_SHARE_MOUNT on first use): ssh moves
# about 2 MB/s under TCG whatever the cipher, which is 40 s for kubelet.
VM_SHARE_TAG="cridock-host"
VM_SHARE_MOUNT="/run/cridock-host"
# The guest reaches the host at this address of qemu's user network, on
# the ports listed only: qemu's guestfwd hands each connection to a socat
# of its own that connects to the same port on the host's 127.0.0.1, where
# the test environment's TLS mirror registry serves registry.k8s.io, gcr.io
# and k8s.gcr.io (docs/testing.md, "Conformance"). restrict=on still keeps
# the guest from everything else.
VM_HOST_ADDR="10.0.2.100"
VM_HOST_PORTS=(443)
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
# busybox-static, and procps for a look around. No Recommends, as on a
# minimal server, except apparmor, which a Debian 12 install has: its kernel
# enables AppArmor, and dockerd then starts no container without
# apparmor_parser to load its docker-default profile. cridock's own .deb
# is installed by the tests.
VM_GUEST_PACKAGES=(
  linux-image-amd64 initramfs-tools zstd kmod udev
  systemd systemd-sysv dbus openssh-server ca-certificates apparmor
  docker.io containerd runc containernetworking-plugins
  iptables conntrack criu busybox-static iproute2 util-linux socat procps
)
# Timers that would wake apt, dpkg or the file system tools in the middle
# of a test, on a guest whose CPU is emulated.
VM_MASKED_UNITS=(apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer)

vm_log() { printf 'vm-node: %s\n' "$*" >&2; }

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

check_name() {
  [[ "$1" =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]] || die "VM name '$1' must be [a-z0-9-], up to 32 characters"
}

# --- the image ----------------------------------------------------------------

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

# image_key: a hash of everything the image is made from. The build steps
# count as their code (declare -f prints a function without its comments,
# so a comment change does not cost a rebuild).
image_key() {
  {
    declare -f host_apt_sources debian_mirrors write_guest_sources configure_guest install_guest_packages finish_guest make_disk build_image
    printf '%s\n' "$VM_DEBIAN_SUITE" "$VM_HOSTNAME" "$VM_DISK_SIZE" "$VM_KERNEL_CMDLINE" "$VM_MIRROR" "$VM_SECURITY_MIRROR"
    printf '%s\n' "${VM_INITRD_MODULES[@]}" "${VM_GUEST_PACKAGES[@]}" "${VM_MASKED_UNITS[@]}"
    cat "$VM_SSH_KEY.pub"
  } | sha256sum | cut -c1-16
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
# building it when absent. One build at a time (flock); other keys' images
# are removed once a new one is in place.
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
    install_missing_packages "${VM_HOST_PACKAGES[@]}"
    local work="$VM_CACHE_DIR/build-$key"
    rm -rf "$work"
    : >"$VM_IMAGE_LOG"
    build_image "$work"
    rm -rf "$VM_IMAGE_DIR"
    mv "$work" "$VM_IMAGE_DIR"
    local old
    for old in "$VM_CACHE_DIR"/*/base.qcow2; do
      old="$(dirname "$old")"
      [[ "$old" == "$VM_IMAGE_DIR" ]] && continue
      # An image a running VM's overlay still rests on stays.
      if grep -qsF "$old/base.qcow2" "$VM_OVERLAY_ROOT"/*/backing; then continue; fi
      rm -rf "$old"
      vm_log "removed the previous image $old"
    done
  fi
  exec {lock_fd}>&-
}

# --- VMs ----------------------------------------------------------------------

pid_file_name() { printf 'vm-%s\n' "$1"; }

vm_port() {
  cat "$ENV_RUN_DIR/vm-$1.port" 2>/dev/null
}

# ssh_options NAME PORT: sets SSH_OPTIONS. Connections go through the
# VM's master connection when it is up (start makes it): a new ssh session
# costs over 2 s of emulated CPU, a session on the master a fraction of that.
# Without the master's socket ssh connects on its own.
ssh_options() {
  SSH_OPTIONS=(-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
    -o BatchMode=yes -o ConnectTimeout=10 -o ServerAliveInterval=15 -o ServerAliveCountMax=8
    -o "ControlPath=$ENV_RUN_DIR/vm-$1.ssh" -i "$VM_SSH_KEY" -p "$2")
}

# vm_ssh NAME CMD...: ssh to a running VM; exits 255 when it does not answer.
vm_ssh() {
  local name="$1" port; shift
  port="$(vm_port "$name")" || die "VM $name is not running (no $ENV_RUN_DIR/vm-$name.port)"
  ssh_options "$name" "$port"
  ssh -o ControlMaster=no "${SSH_OPTIONS[@]}" root@127.0.0.1 "$@"
}

# start_ssh_master NAME: the master connection, a daemon of its own (pid
# file ssh-vm-NAME); it ends with the VM's connection, or at stop.
start_ssh_master() {
  local name="$1"
  pid_of "ssh-vm-$name" >/dev/null && return 0
  ssh_options "$name" "$(vm_port "$name")"
  rm -f "$ENV_RUN_DIR/vm-$name.ssh"
  start_daemon "ssh-vm-$name" ssh -o ControlMaster=yes "${SSH_OPTIONS[@]}" -N root@127.0.0.1
  wait_until 30 test -S "$ENV_RUN_DIR/vm-$name.ssh" || vm_log "VM $name: the ssh master connection did not come up; each ssh connects on its own"
}

ssh_answers() {
  vm_ssh "$1" true </dev/null >/dev/null 2>&1
}

# free_port: a port on 127.0.0.1 nothing listens on, below Kubernetes'
# NodePort range (30000-32767: the VM may run beside the cluster suite).
# Another process may take it before qemu does; start then tries another.
free_port() {
  local port i
  for ((i = 0; i < 100; i++)); do
    port=$((20000 + RANDOM % 10000))
    if [[ -z "$(ss -Htln "sport = :$port" 2>/dev/null)" ]]; then
      echo "$port"
      return 0
    fi
  done
  die "no free port found on 127.0.0.1"
}

# launch NAME OVERLAY PORT SHARE: qemu in the background (start_daemon:
# its own session, pid file, log), its session niced so that the host's own
# work goes first: beside CI's suites, the guest's emulated CPUs take the
# cycles the suites leave, instead of half the machine.
# The console log starts empty, but for a reboot (LAUNCH_KEEP_CONSOLE=1),
# which appends the new boot to the old one's shutdown.
launch() {
  local name="$1" overlay="$2" port="$3" share="$4"
  local console="$ENV_LOG_DIR/vm-$name-console.log" netdev="user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" p
  for p in "${VM_HOST_PORTS[@]}"; do
    netdev+=",guestfwd=tcp:$VM_HOST_ADDR:$p-cmd:socat STDIO TCP:127.0.0.1:$p"
  done
  [[ "${LAUNCH_KEEP_CONSOLE:-0}" == 1 ]] || : >"$console"
  START_DAEMON_NICE=10 start_daemon "$(pid_file_name "$name")" qemu-system-x86_64 \
    -name "cridock-vm-$name" -machine q35,accel=tcg -cpu max,la57=off -smp 2 -m "$VM_MEMORY_MB" \
    -nodefaults -display none -no-reboot \
    -kernel "$VM_IMAGE_DIR/vmlinuz" -initrd "$VM_IMAGE_DIR/initrd.img" -append "$VM_KERNEL_CMDLINE" \
    -drive "file=$overlay,if=virtio,format=qcow2,cache=unsafe,discard=unmap" \
    -netdev "$netdev" -device virtio-net-pci,netdev=n0 \
    -device virtio-rng-pci \
    -virtfs "local,path=$share,mount_tag=$VM_SHARE_TAG,security_model=none,readonly=on" \
    -serial "file:$console"
}

cmd_start() {
  local name="$1"
  check_name "$name"
  mkdir -p "$ENV_RUN_DIR" "$ENV_LOG_DIR"
  local pid_name
  pid_name="$(pid_file_name "$name")"
  if pid_of "$pid_name" >/dev/null; then
    vm_log "VM $name is running already (pid $(pid_of "$pid_name")); waiting for its ssh"
  else
    install_missing_packages "${VM_HOST_PACKAGES[@]}"
    image_dir
    local dir="$VM_OVERLAY_ROOT/$name"
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "$VM_IMAGE_DIR/base.qcow2" >"$dir/backing"
    mkdir -p "$dir/share"
    qemu-img create -q -f qcow2 -b "$VM_IMAGE_DIR/base.qcow2" -F qcow2 "$dir/disk.qcow2"
    : >"$ENV_LOG_DIR/vm-$name.log"
    boot_overlay "$name" ""
  fi
  wait_for_ssh "$name"
}

# boot_overlay NAME PORT: qemu on NAME's overlay, ssh forwarded from PORT
# (a free one when empty or taken).
boot_overlay() {
  local name="$1" port="$2" dir="$VM_OVERLAY_ROOT/$1" pid_name attempt pid
  pid_name="$(pid_file_name "$name")"
  for ((attempt = 1; ; attempt++)); do
    [[ -n "$port" ]] || port="$(free_port)"
    echo "$port" >"$ENV_RUN_DIR/vm-$name.port"
    launch "$name" "$dir/disk.qcow2" "$port" "$dir/share"
    # qemu exits at once when the forward's port was taken meanwhile.
    sleep 2
    pid_of "$pid_name" >/dev/null && break
    ((attempt < 3)) || die "qemu exited at start; see $ENV_LOG_DIR/vm-$name.log"
    vm_log "qemu exited at start (port $port taken?); trying another port"
    port=""
  done
  pid="$(pid_of "$pid_name")"
  vm_log "VM $name booting: pid $pid, ssh on 127.0.0.1:$port, console log $ENV_LOG_DIR/vm-$name-console.log"
}

# wait_for_ssh NAME: until the booting guest's ssh answers (bounded), then its master connection.
wait_for_ssh() {
  local name="$1" pid_name
  pid_name="$(pid_file_name "$name")"
  local started=$SECONDS next=15 line
  while ! ssh_answers "$name"; do
    pid_of "$pid_name" >/dev/null || die "VM $name stopped while booting; see $ENV_LOG_DIR/vm-$name-console.log and vm-$name.log"
    if ((SECONDS - started >= VM_BOOT_TIMEOUT)); then
      die "VM $name: no ssh after ${VM_BOOT_TIMEOUT}s (it is left running: vm/node.sh stop $name); see $ENV_LOG_DIR/vm-$name-console.log"
    fi
    if ((SECONDS - started >= next)); then
      line="$(sed -e 's/\x1b\[[0-9;]*m//g' -e 's/\r//g' "$ENV_LOG_DIR/vm-$name-console.log" | grep -v '^[[:space:]]*$' | tail -n1 | cut -c1-100)"
      vm_log "VM $name still booting after $((SECONDS - started))s: ${line:-no console output yet}"
      next=$((next + 15))
    fi
    sleep 3
  done
  vm_log "VM $name: ssh answers after $((SECONDS - started))s"
  start_ssh_master "$name"
}

# cmd_reboot NAME [--crash]: the guest reboots itself; qemu (-no-reboot)
# exits at its reset, and NAME's overlay is booted again on the same port.
# --crash is sysrq's `b`: the kernel resets the machine at once, with the
# page cache unwritten and the file systems mounted, as at a power loss.
# (Killing qemu would not be one: with cache=unsafe, qemu's own qcow2
# metadata would be lost too, which no real disk does.) A clean reboot
# stops every unit first: Docker's containers take their grace period, so
# the wait for qemu to end is long under TCG.
cmd_reboot() {
  local name="$1" crash="${2:-}" pid_name pid port how i
  pid_name="$(pid_file_name "$name")"
  pid="$(pid_of "$pid_name")" || die "VM $name is not running"
  port="$(vm_port "$name")" || die "VM $name has no port file"
  if [[ "$crash" == --crash ]]; then
    how="echo 1 >/proc/sys/kernel/sysrq && echo b >/proc/sysrq-trigger"
  elif [[ -z "$crash" ]]; then
    how="systemctl reboot"
  else
    die "reboot: unknown option '$crash' (--crash or nothing)"
  fi
  vm_log "VM $name: ${crash:+crashing and }rebooting ($how)"
  # The session dies with the guest (as stop_vm's poweroff does): its status says nothing.
  ssh_options "$name" "$port"
  timeout 60 ssh -o ControlMaster=no "${SSH_OPTIONS[@]}" root@127.0.0.1 "$how" </dev/null >/dev/null 2>&1 || true
  for ((i = 0; i < VM_REBOOT_TIMEOUT; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  kill -0 "$pid" 2>/dev/null && die "VM $name: qemu still runs ${VM_REBOOT_TIMEOUT}s after '$how' (left running)"
  rm -f "$ENV_RUN_DIR/$pid_name.pid"
  stop_daemon "ssh-vm-$name" 5
  rm -f "$ENV_RUN_DIR/vm-$name.ssh"
  vm_log "VM $name went down after ${i}s; booting it again"
  # The kernel and initrd of the image this overlay was made from.
  VM_IMAGE_DIR="$(dirname "$(cat "$VM_OVERLAY_ROOT/$name/backing")")"
  LAUNCH_KEEP_CONSOLE=1 boot_overlay "$name" "$port"
  wait_for_ssh "$name"
}

# stop_vm NAME: poweroff through ssh, then SIGTERM (qemu quits at once),
# then SIGKILL; the overlay and the port file go.
stop_vm() {
  local name="$1" pid_name pid i
  pid_name="$(pid_file_name "$name")"
  if pid="$(pid_of "$pid_name")"; then
    local port
    port="$(vm_port "$name")" || port=""
    ssh_options "$name" "$port"
    # A guest that does not answer within the ssh timeouts is killed at once.
    if [[ -n "$port" && -f "$VM_SSH_KEY" ]] && command -v ssh >/dev/null &&
      timeout 30 ssh -o ControlMaster=no "${SSH_OPTIONS[@]}" root@127.0.0.1 systemctl poweroff </dev/null >/dev/null 2>&1; then
      vm_log "VM $name powering off (up to ${VM_STOP_TIMEOUT}s)"
      for ((i = 0; i < VM_STOP_TIMEOUT; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 1
      done
    fi
    stop_daemon "$pid_name" 10
  else
    rm -f "$ENV_RUN_DIR/$pid_name.pid"
  fi
  stop_daemon "ssh-vm-$name" 5
  rm -f "$ENV_RUN_DIR/vm-$name.port" "$ENV_RUN_DIR/vm-$name.ssh"
  rm -rf "${VM_OVERLAY_ROOT:?}/$name"
  vm_log "VM $name stopped"
}

cmd_stop() {
  local name
  if [[ "$1" == "--all" ]]; then
    for name in "$ENV_RUN_DIR"/vm-*.pid "$VM_OVERLAY_ROOT"/*/; do
      [[ -e "$name" ]] || continue
      name="${name%/}"
      name="${name##*/}"
      name="${name#vm-}"
      name="${name%.pid}"
      stop_vm "$name"
    done
    rmdir "$VM_OVERLAY_ROOT" 2>/dev/null || true
    return 0
  fi
  check_name "$1"
  stop_vm "$1"
}

# cmd_copy NAME SRC DST: SRC goes into the VM's share under a name of its
# own, the guest copies it from there to DST (a file first under a
# temporary name), and the share's copy goes.
cmd_copy() {
  local name="$1" src="$2" dst="$3" share="$VM_OVERLAY_ROOT/$1/share" item qdst qitem
  [[ -e "$src" ]] || die "$src does not exist"
  [[ -d "$share" ]] || die "VM $name is not running (no $share)"
  item="copy-$$-$RANDOM"
  cp -a "$src" "$share/$item"
  printf -v qdst '%q' "$dst"
  printf -v qitem '%q' "$VM_SHARE_MOUNT/$item"
  local mount="mkdir -p $VM_SHARE_MOUNT && { mountpoint -q $VM_SHARE_MOUNT || mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=1048576 $VM_SHARE_TAG $VM_SHARE_MOUNT; }"
  local status=0
  if [[ -d "$src" ]]; then
    vm_ssh "$name" "$mount && mkdir -p $qdst && cp -a $qitem/. $qdst/" </dev/null || status=$?
  else
    vm_ssh "$name" "$mount && mkdir -p \"\$(dirname $qdst)\" && cp -a $qitem $qdst.part && mv -f $qdst.part $qdst" </dev/null || status=$?
  fi
  rm -rf "${share:?}/$item"
  ((status == 0)) || die "copying $src to VM $name:$dst failed (exit $status)"
}

cmd_status() {
  local key
  if [[ -f "$VM_SSH_KEY.pub" ]]; then
    debian_mirrors
    key="$(image_key)"
    if [[ -f "$VM_CACHE_DIR/$key/base.qcow2" ]]; then
      echo "image $VM_CACHE_DIR/$key ($(du -sh "$VM_CACHE_DIR/$key" | cut -f1))"
    else
      echo "image: not built for the current inputs (key $key)"
    fi
  else
    echo "image: not built (no ssh key yet)"
  fi
  local file name pid state
  for file in "$ENV_RUN_DIR"/vm-*.pid; do
    [[ -e "$file" ]] || continue
    name="${file##*/vm-}"
    name="${name%.pid}"
    if pid="$(pid_of "vm-$name")"; then
      state="booting"
      ssh_answers "$name" && state="ssh answers"
      echo "vm $name: pid $pid, ssh 127.0.0.1:$(vm_port "$name"), $state"
    else
      echo "vm $name: not running (stale pid file)"
    fi
  done
}

main() {
  local command="${1:-}"
  (($# > 0)) && shift
  case "$command" in
    image)
      require_root
      install_missing_packages "${VM_HOST_PACKAGES[@]}"
      image_dir
      echo "$VM_IMAGE_DIR"
      ;;
    start) (($# == 1)) || usage; require_root; cmd_start "$1" ;;
    ssh) (($# >= 1)) || usage; check_name "$1"; vm_ssh "$@" ;;
    copy) (($# == 3)) || usage; check_name "$1"; cmd_copy "$@" ;;
    stop) (($# == 1)) || usage; require_root; cmd_stop "$1" ;;
    reboot) (($# == 1 || $# == 2)) || usage; require_root; check_name "$1"; cmd_reboot "$@" ;;
    status) cmd_status ;;
    # Internal: build_image runs this in a private mount namespace.
    _chroot-install) install_guest_packages "$1" ;;
    *) usage ;;
  esac
}

main "$@"
