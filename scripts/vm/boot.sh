# The cgroup v2 test node's boot: qemu launched on a VM's overlay, and the
# wait for the guest's ssh, which follows its serial console
# (scripts/vm/boot-progress.ts judges it): a guest still printing is
# booting; one silent for VM_BOOT_SILENCE seconds is stuck, one whose
# console shows a kernel panic or oops has failed, and so has one whose qemu
# aborted or faulted by itself (crashed): each is booted again, up to
# VM_BOOT_RETRIES times. A boot that fails ends with one line,
# `vm-node: NAME did not boot: REASON`. Sourced by scripts/vm/node.sh,
# after scripts/env/common.sh and image.sh (the kernel command line); start
# and reboot (lifecycle.sh) boot through boot_vm.

# shellcheck shell=bash
# shellcheck disable=SC2034  # settings for the files node.sh sources

VM_MEMORY_MB="${CRIDOCK_VM_MEMORY_MB:-2048}"
# Kernel parameters given at boot only (the image's key does not hash
# them, as they change nothing in it). tsc=unstable: Debian 13's kernel
# finds the emulated TSCs in sync and marks sched_clock stable 3 s into
# each boot, a static key flipped (its code patched with int3) while both
# vCPUs run; under qemu 7.2's multi-threaded TCG one boot in six oopsed
# there (scripts/vm/host.sh). Debian 12's kernel marks the TSCs
# unsynchronized before that key is set; with the parameter both releases
# boot the same way, on the HPET clocksource, and no boot flips the key.
VM_BOOT_CMDLINE="tsc=unstable"
# The boot's bounds (node.sh's header): the hard cap on the wait for ssh
# while the console still prints, the console's silence that makes a boot
# stuck, and how many times a boot that panicked is tried again.
VM_BOOT_TIMEOUT="${CRIDOCK_VM_BOOT_TIMEOUT:-900}"
VM_BOOT_SILENCE="${CRIDOCK_VM_BOOT_SILENCE:-300}"
VM_BOOT_RETRIES="${CRIDOCK_VM_BOOT_RETRIES:-2}"
# The console's judge, through the repository's tsx: node_modules is there
# whenever start or reboot runs in CI (scripts/test.sh's ensure_node_modules,
# the tap files' helper); without it the wait is bounded by time alone.
VM_BOOT_PROGRESS=("$CRIDOCK_REPO_ROOT/node_modules/.bin/tsx" "$CRIDOCK_REPO_ROOT/scripts/vm/boot-progress.ts")
# Files go in through a read-only virtio-9p share of the VM's directory
# share/ (mounted in the guest at $VM_SHARE_MOUNT on first use): ssh moves
# about 2 MB/s under TCG whatever the cipher, which is 40 s for kubelet.
VM_SHARE_TAG="cridock-host"
VM_SHARE_MOUNT="/run/cridock-host"
# The guest reaches the host at this address of qemu's user network, on
# the ports listed only: qemu's guestfwd hands each connection to a socat
# of its own that connects to the same port on the host's 127.0.0.1, where
# the test environment's TLS mirror registry serves registry.k8s.io, gcr.io
# and k8s.gcr.io (docs/testing.md, "The test environment"). restrict=on still keeps
# the guest from everything else.
VM_HOST_ADDR="10.0.2.100"
VM_HOST_PORTS=(443)


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
# its own session, pid file, log), its session niced (vm_nice) so that the
# host's own work goes first: beside CI's suites, the guest's emulated CPUs
# take the cycles the suites leave, instead of half the machine.
# The console log starts empty, but for a reboot or a boot tried again
# (LAUNCH_KEEP_CONSOLE=1), which appends the new boot to what was before:
# qemu's file backend opens it with append=on (its -serial file: would
# truncate it), and boot-progress.ts notes where this boot's output begins.
launch() {
  local name="$1" overlay="$2" port="$3" share="$4" nice
  nice="$(vm_nice)"
  local console="$ENV_LOG_DIR/vm-$name-console.log" netdev="user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" p
  for p in "${VM_HOST_PORTS[@]}"; do
    netdev+=",guestfwd=tcp:$VM_HOST_ADDR:$p-cmd:socat STDIO TCP:127.0.0.1:$p"
  done
  [[ "${LAUNCH_KEEP_CONSOLE:-0}" == 1 ]] || : >"$console"
  boot_progress_start "$name"
  START_DAEMON_NICE="$nice" start_daemon "$(pid_file_name "$name")" qemu-system-x86_64 \
    -name "cridock-vm-$name" -machine q35 -accel "tcg,thread=$(tcg_thread)" -cpu max,la57=off -smp 2 -m "$VM_MEMORY_MB" \
    -nodefaults -display none -no-reboot \
    -kernel "$VM_IMAGE_DIR/vmlinuz" -initrd "$VM_IMAGE_DIR/initrd.img" -append "$VM_KERNEL_CMDLINE $VM_BOOT_CMDLINE" \
    -drive "file=$overlay,if=virtio,format=qcow2,cache=unsafe,discard=unmap" \
    -netdev "$netdev" -device virtio-net-pci,netdev=n0 \
    -device virtio-rng-pci \
    -virtfs "local,path=$share,mount_tag=$VM_SHARE_TAG,security_model=none,readonly=on" \
    -chardev "file,id=vmconsole,path=$console,append=on" -serial chardev:vmconsole
}

# vm_nice: the nice value of qemu's session (CRIDOCK_VM_NICE, default 10).
# With autogroup scheduling the session is one group, weighed against the
# test run's own session and any other: at 10 its weight is a tenth of
# theirs (110 against 1024), so the host's suites go first and the guest
# takes what they leave. Measured with one core kept busy by another
# session (docs/testing.md): at 10 the guest starved in the busiest
# quarter hour (the loaded run of 4c7c340); at 3 (526, about half) it still
# starved there, and the host's suites took 75 minutes instead of 58, so the
# whole run took longer. The knob stays for such measurements.
vm_nice() {
  local nice="${CRIDOCK_VM_NICE:-10}"
  [[ "$nice" =~ ^-?[0-9]+$ ]] && ((nice >= -20 && nice <= 19)) ||
    die "CRIDOCK_VM_NICE=$nice: an integer from -20 to 19 wanted"
  echo "$nice"
}

# tcg_thread: qemu's TCG threading (CRIDOCK_VM_TCG_THREAD): multi, the
# default, one host thread per vCPU (safe for Debian 13's guests from qemu
# 10 on, which scripts/vm/host.sh installs); or single, both vCPUs in turn
# on one thread, about half the speed (a boot to ssh 66 s against 28 s).
tcg_thread() {
  local thread="${CRIDOCK_VM_TCG_THREAD:-multi}"
  [[ "$thread" == multi || "$thread" == single ]] ||
    die "CRIDOCK_VM_TCG_THREAD=$thread: multi or single wanted"
  echo "$thread"
}

# boot_progress_start NAME: a new boot's state for boot-progress.ts
# ($ENV_RUN_DIR/vm-NAME.boot.json), made just before qemu starts. The
# previous boot's goes first, whatever happens: a poll without a state
# begins one at the console's top.
boot_progress_start() {
  local name="$1" state="$ENV_RUN_DIR/vm-$1.boot.json"
  rm -f "$state"
  [[ -x "${VM_BOOT_PROGRESS[0]}" ]] || return 0
  "${VM_BOOT_PROGRESS[@]}" start "$state" "$ENV_LOG_DIR/vm-$name-console.log" 2>"$ENV_RUN_DIR/vm-$name.boot.err" ||
    vm_log "VM $name: boot-progress.ts start failed ($(last_line "$ENV_RUN_DIR/vm-$name.boot.err")); the console is watched from its top"
}

# last_line FILE: FILE's last line with something on it, without colours
# and carriage returns, cut to 100 characters ("" when it has none or is
# missing). awk, not grep -v: a grep that matches nothing fails, and with
# pipefail so does the pipeline, and set -e ends the script without a word
# (a console is empty for a boot's first seconds).
last_line() {
  { sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' -e 's/\r//g' "$1" 2>/dev/null || true; } |
    awk 'NF { last = $0 } END { print substr(last, 1, 100) }'
}

# qemu_exit_status NAME: sets QEMU_STATUS to the exit status of NAME's
# qemu, which is gone: known when this shell launched it (bash waits for
# its own children only), else "?".
qemu_exit_status() {
  local pid status=0
  QEMU_STATUS="?"
  pid="$(cat "$ENV_RUN_DIR/$(pid_file_name "$1").pid" 2>/dev/null)" || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  wait "$pid" 2>/dev/null || status=$?
  # 127: not a child of this shell.
  if ((status != 127)); then QEMU_STATUS="$status"; fi
}

# qemu_exit_reason NAME: why the boot ended, when qemu exited (after
# qemu_exit_status): its status and the last line of its stderr.
qemu_exit_reason() {
  local said
  said="$(last_line "$ENV_LOG_DIR/vm-$1.log")"
  if [[ "$QEMU_STATUS" == "?" ]]; then
    printf 'qemu exited (status unknown): %s\n' "${said:-nothing on its stderr}"
  else
    printf 'qemu exited with status %s: %s\n' "$QEMU_STATUS" "${said:-nothing on its stderr}"
  fi
}

# make_overlay NAME: a fresh copy-on-write overlay of the image for NAME,
# with its share directory (the VM's own directory is made anew).
make_overlay() {
  local dir="$VM_OVERLAY_ROOT/$1"
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "$VM_IMAGE_DIR/base.qcow2" >"$dir/backing"
  mkdir -p "$dir/share"
  qemu-img create -q -f qcow2 -b "$VM_IMAGE_DIR/base.qcow2" -F qcow2 "$dir/disk.qcow2"
}

# boot_overlay NAME PORT: qemu on NAME's overlay, ssh forwarded from PORT
# (a free one when empty or taken). Returns 1 with BOOT_REASON when qemu
# exited at start three times.
boot_overlay() {
  local name="$1" port="$2" dir="$VM_OVERLAY_ROOT/$1" pid_name attempt pid
  pid_name="$(pid_file_name "$name")"
  for ((attempt = 1; ; attempt++)); do
    [[ -n "$port" ]] || port="$(free_port)"
    echo "$port" >"$ENV_RUN_DIR/vm-$name.port"
    launch "$name" "$dir/disk.qcow2" "$port" "$dir/share"
    # qemu exits at once when the forward's port was taken meanwhile.
    sleep 2
    # Read once: a qemu that dies between a check and a second read would
    # fail the assignment, and set -e end the script without a word.
    pid="$(pid_of "$pid_name")" && break
    qemu_exit_status "$name"
    if ((attempt >= 3)); then
      BOOT_VERDICT=exited
      BOOT_REASON="$(qemu_exit_reason "$name") (at start, 3 tries)"
      return 1
    fi
    vm_log "qemu exited at start (port $port taken?); trying another port"
    port=""
  done
  vm_log "VM $name booting: pid $pid, ssh on 127.0.0.1:$port, console log $ENV_LOG_DIR/vm-$name-console.log"
}

# check_boot_settings: the boot's bounds are whole numbers of seconds (a
# bad one would end the first arithmetic on it, and with it the script).
check_boot_settings() {
  local setting
  for setting in VM_BOOT_TIMEOUT VM_BOOT_SILENCE VM_BOOT_RETRIES; do
    [[ "${!setting}" =~ ^[0-9]+$ ]] || die "CRIDOCK_${setting#VM_}=${!setting}: a whole number wanted"
  done
}

# wait_for_ssh NAME [TRY]: until the booting guest's ssh answers, then its
# master connection. Each round tries ssh, then has boot-progress.ts judge
# the console (TRY: which try of the boot this is, for the reason); it
# returns 1 with BOOT_VERDICT (panic, stuck, timeout, crashed, exited) and
# BOOT_REASON (one line) as soon as the boot has failed. Without tsx, or
# once its judge fails, the wait watches qemu and the hard cap alone.
wait_for_ssh() {
  local name="$1" try="${2:-1}" pid_name started=$SECONDS next=15 watch=1 gone out verdict text
  local state="$ENV_RUN_DIR/vm-$name.boot.json" errors="$ENV_RUN_DIR/vm-$name.boot.err" console="$ENV_LOG_DIR/vm-$name-console.log"
  pid_name="$(pid_file_name "$name")"
  check_boot_settings
  BOOT_VERDICT="" BOOT_REASON=""
  if [[ ! -x "${VM_BOOT_PROGRESS[0]}" ]]; then
    watch=0
    vm_log "VM $name: no ${VM_BOOT_PROGRESS[0]} (npm ci): its boot is bounded by time alone (${VM_BOOT_TIMEOUT}s)"
  fi
  while ! ssh_answers "$name"; do
    local args=(poll "$state" --silence "$VM_BOOT_SILENCE" --timeout "$VM_BOOT_TIMEOUT" --try "$try" --console "$console")
    gone=0
    if ! pid_of "$pid_name" >/dev/null; then
      gone=1
      qemu_exit_status "$name"
      args+=(--qemu-exited "$QEMU_STATUS" --qemu-log "$ENV_LOG_DIR/vm-$name.log")
    fi
    verdict=""
    if ((watch)); then
      if out="$("${VM_BOOT_PROGRESS[@]}" "${args[@]}" 2>"$errors")"; then
        verdict="${out%%$'\n'*}"
        text=""
        if [[ "$out" == *$'\n'* ]]; then text="${out#*$'\n'}"; fi
      fi
      case "$verdict" in
        booting | panic | stuck | timeout | crashed | exited) ;;
        *)
          watch=0
          vm_log "VM $name: boot-progress.ts failed ($(last_line "$errors")); its boot is bounded by time alone (${VM_BOOT_TIMEOUT}s)"
          ;;
      esac
    fi
    if ((!watch)); then
      if ((gone)); then
        verdict=exited text="$(qemu_exit_reason "$name")"
      elif ((SECONDS - started >= VM_BOOT_TIMEOUT)); then
        verdict=timeout text="no ssh after $((SECONDS - started)) s: $(last_line "$console")"
      else
        verdict=booting text="$(last_line "$console")"
      fi
    fi
    if [[ "$verdict" != booting ]]; then
      # A qemu that died while the judge ran: its exit says more than the
      # silence or the time it caused. The next round says so.
      if ((!gone)) && [[ "$verdict" == stuck || "$verdict" == timeout ]] && ! pid_of "$pid_name" >/dev/null; then continue; fi
      BOOT_VERDICT="$verdict" BOOT_REASON="$text"
      return 1
    fi
    if ((SECONDS - started >= next)); then
      vm_log "VM $name still booting after $((SECONDS - started))s: ${text:-no console output yet}"
      next=$((next + 15))
    fi
    sleep 3
  done
  rm -f "$errors"
  vm_log "VM $name: ssh answers after $((SECONDS - started))s"
  start_ssh_master "$name"
}

# boot_vm NAME PORT fresh|same: boots NAME and waits for its ssh. A boot
# whose console shows a kernel panic or oops, that is stuck (a guest
# starved by a loaded host can stall for good: one in CI fell silent after
# a kernel report 421 s into its boot), or whose qemu crashed by its own
# hand (one in CI aborted on an assertion of its multi-threaded TCG,
# iotlb_to_section, while Debian 13 booted) is stopped and tried again, up to
# VM_BOOT_RETRIES times: start's on a fresh overlay of the image
# (fresh), reboot's on the same disk, which is what a reboot is about
# (same). The console log keeps every try's output, one after the other.
# A boot that fails ends the script (boot_failed).
boot_vm() {
  local name="$1" port="$2" overlay="$3" try tries keep=0 where=" on a fresh overlay"
  check_boot_settings
  tries=$((VM_BOOT_RETRIES + 1))
  if [[ "$overlay" == same ]]; then keep=1 where=""; fi
  for ((try = 1; ; try++)); do
    if [[ "$overlay" == fresh ]]; then make_overlay "$name"; fi
    LAUNCH_KEEP_CONSOLE=$keep boot_overlay "$name" "$port" || boot_failed "$name"
    if wait_for_ssh "$name" "$try"; then return 0; fi
    case "$BOOT_VERDICT" in panic | stuck | crashed) ;; *) boot_failed "$name" ;; esac
    ((try < tries)) || boot_failed "$name"
    vm_log "VM $name: $BOOT_REASON; booting it again$where (try $((try + 1)) of $tries)"
    stop_daemon "$(pid_file_name "$name")" 10
    keep=1
  done
}

# boot_failed NAME: the end of a boot that failed (BOOT_REASON): its last
# line on stderr is `vm-node: NAME did not boot: REASON`, for scripts/test.sh
# to put in CI's summary. A qemu still running is left for a look.
boot_failed() {
  local name="$1"
  if pid_of "$(pid_file_name "$name")" >/dev/null; then
    vm_log "VM $name is left running (vm/node.sh stop $name); console log $ENV_LOG_DIR/vm-$name-console.log"
  else
    vm_log "VM $name: console log $ENV_LOG_DIR/vm-$name-console.log, qemu's log $ENV_LOG_DIR/vm-$name.log"
  fi
  vm_log "$name did not boot: ${BOOT_REASON:-no reason recorded}"
  exit 1
}
