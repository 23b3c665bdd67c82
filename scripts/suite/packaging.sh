# shellcheck shell=bash
# The packaging build and suite of scripts/test.sh (which sources this
# file): the executable and the .deb built once per run (the packaging and
# the VM suites, scripts/suite/vm.sh, install the same file), the tarball, and
# the packaging suite on them. Uses run_tap_suite (scripts/suite/tap.sh) and
# test.sh's SUMMARY_ARGS.

# build_deb: the executable and the .deb (xz level 1, the fast build), once
# per run: the packaging and vm suites both install it. BUILT_DEB is its path.
BUILT_DEB=""
build_deb() {
  [[ -n "$BUILT_DEB" ]] && return 0
  (cd "$CRIDOCK_REPO_ROOT" && node_modules/.bin/tsx scripts/build/binary.ts && CRIDOCK_DEB_XZ_LEVEL=1 bash scripts/build/deb.sh) </dev/null || return 1
  # The newest .deb; head ends the pipe early (ls's SIGPIPE would fail it under pipefail), and none is a failure.
  BUILT_DEB="$(ls -t "$CRIDOCK_REPO_ROOT"/dist/cridock_*_amd64.deb 2>/dev/null | head -n 1 || true)"
  [[ -n "$BUILT_DEB" ]]
}

# The packaging suite (test/packaging): the executable, the .deb (xz level
# 1: a few MiB larger than a release's, 40 s less CPU) and the tarball are
# built, then tested; a failed build counts as a failure.
run_packaging() {
  local engine="$1"
  echo "# ---- building the executable, the .deb and the tarball"
  if ! build_deb || ! (cd "$CRIDOCK_REPO_ROOT" && bash scripts/build/tarball.sh) </dev/null; then
    SUMMARY_ARGS+=(--failed "packaging@$engine=building the executable or the packages failed")
    return 0
  fi
  # What runs here is the bundle and the executable, which coverage does not map back to src/.
  run_tap_suite packaging "$engine" --jobs=1 --timeout=600 --disable-coverage
}
