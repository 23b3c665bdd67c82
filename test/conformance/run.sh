#!/usr/bin/env bash
# Runs critest against a fresh cridock child process (see run.ts). Needs the
# environment from scripts/env/setup.sh and critest from
# scripts/env/install-cri-tools.sh. Arguments are passed on to critest, e.g.
#   bash test/conformance/run.sh -ginkgo.focus='Runtime info' -ginkgo.v
# (a -ginkgo.focus given here replaces the focus files).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/env/common.sh
source "$repo_root/scripts/env/common.sh"
cd "$repo_root"
# cridock runs on the Node the package ships, as in scripts/test.sh (a no-op when it already is first).
use_pinned_node
exec node_modules/.bin/tsx test/conformance/run.ts "$@"
