# The cgroup v2 test node's VMs once booted and around their boot: where
# a VM's files are, ssh to it (and its master connection), the commands
# start (an overlay of the image, booted), reboot, stop, copy and status.
# Sourced by scripts/vm/node.sh, after scripts/env/common.sh, image.sh and
# boot.sh (the launch and the wait for ssh that start and reboot use), and
# before engine.sh (switch_engine, which start calls for CRIDOCK_VM_ENGINE).

# shellcheck shell=bash
# shellcheck disable=SC2034  # settings for the files node.sh sources

VM_OVERLAY_ROOT="$ENV_STATE_DIR/vm"
# Seconds stop gives the guest's own poweroff before it kills qemu.
VM_STOP_TIMEOUT=90
# Seconds reboot waits for the guest's reset after asking for it.
VM_REBOOT_TIMEOUT=600

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

# ssh_answers NAME: whether the guest's ssh runs a command. Not through
# vm_ssh, whose die (a port file gone meanwhile: a stop) would end the
# script with its message in /dev/null.
ssh_answers() {
  local port
  port="$(vm_port "$1")" || return 1
  ssh_options "$1" "$port"
  ssh -o ControlMaster=no "${SSH_OPTIONS[@]}" root@127.0.0.1 true </dev/null >/dev/null 2>&1
}

# cmd_start NAME: boots NAME on a fresh overlay of the image (boot_vm: a
# boot that panics is tried again), or, when it runs already, waits for
# its ssh. A boot that fails ends the script (boot_failed).
cmd_start() {
  local name="$1"
  check_name "$name"
  mkdir -p "$ENV_RUN_DIR" "$ENV_LOG_DIR"
  local pid_name
  pid_name="$(pid_file_name "$name")"
  if pid_of "$pid_name" >/dev/null; then
    vm_log "VM $name is running already (pid $(pid_of "$pid_name")); waiting for its ssh"
    wait_for_ssh "$name" 1 || boot_failed "$name"
  else
    ensure_vm_host
    image_dir
    : >"$ENV_LOG_DIR/vm-$name.log"
    boot_vm "$name" "" fresh
    # A fresh guest runs docker.io; CRIDOCK_VM_ENGINE may ask for another engine.
    [[ "$VM_ENGINE" == distro ]] || switch_engine "$name" "$VM_ENGINE"
  fi
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
  [[ -f "$VM_OVERLAY_ROOT/$name/backing" ]] || die "VM $name has no $VM_OVERLAY_ROOT/$name/backing"
  VM_IMAGE_DIR="$(dirname "$(cat "$VM_OVERLAY_ROOT/$name/backing")")"
  boot_vm "$name" "$port" same
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
  rm -f "$ENV_RUN_DIR/vm-$name.port" "$ENV_RUN_DIR/vm-$name.ssh" "$ENV_RUN_DIR/vm-$name.boot.json" "$ENV_RUN_DIR/vm-$name.boot.err"
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
    # Each file unlinked before it is written: a binary the guest runs (an
    # engine's dockerd, replaced by another engine's) refuses a write in
    # place ("Text file busy"), and the running process keeps the old one.
    vm_ssh "$name" "$mount && mkdir -p $qdst && cp -a --remove-destination $qitem/. $qdst/" </dev/null || status=$?
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

