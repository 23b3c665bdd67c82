#!/usr/bin/env bash
# Runs one benchmark of scripts/bench/ inside a running node VM
# (scripts/vm/node.sh start NAME), for what only a real node has: user
# namespaces need Linux 6.3 and util-linux 2.39 (Debian 13's), this host
# has neither the util-linux nor cgroup v2. The bench is bundled with its
# dependencies into one ES module (scripts/build/bundle.ts) and copied into
# the guest with this host's node, which runs it there as root: the guest
# needs no repository, npm or network.
#
#   bash scripts/bench/in-vm.sh NAME BENCH [ARGS...]
#   e.g. in-vm.sh node1 oci-layer --docker-endpoint unix:///var/run/docker.sock --image busybox:1.36
#
# Timings under the guest's emulated CPU are slower than a node's; the
# ratios between kinds of one run are what such a run gives.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
die() { printf 'in-vm: %s\n' "$*" >&2; exit 1; }

(($# >= 2)) || { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }
name="$1" bench="$2"
shift 2
[[ "$bench" =~ ^[a-z0-9-]+$ && -f "$root/scripts/bench/$bench.ts" ]] || die "no benchmark scripts/bench/$bench.ts"
# The benchmark runs in the guest on the Node cridock ships (scripts/build/node-runtime.json).
node_bin="$(cd "$root" && node_modules/.bin/tsx scripts/build/node-runtime.ts bin)/node" || die "fetching the pinned Node failed"

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
(cd "$root" && node_modules/.bin/tsx scripts/build/bundle.ts "scripts/bench/$bench.ts" "$out/$bench.mjs")
cp "$node_bin" "$out/node"

node_sh="$root/scripts/vm/node.sh"
bash "$node_sh" copy "$name" "$out" /root/cridock-bench
# Each argument quoted for the guest's shell, which reads the command line.
args=""
for a in "$@"; do args+=" $(printf '%q' "$a")"; done
bash "$node_sh" ssh "$name" "cd /root/cridock-bench && ./node $bench.mjs$args"
