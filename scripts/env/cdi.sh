# shellcheck shell=bash
# The CDI test device: a CDI spec in /etc/cdi (a spec directory Docker 25+
# reads when its CDI support is on; Engine 29 has it on by default) for a
# harmless device, so tests can ask for it by name. Each of the three kinds
# of edit CDI makes is in it: a device node with /dev/null's numbers (1:3),
# a read-only bind mount of a small directory, and an environment variable.
# Keep the names in step with CDI_TEST_* in test/helpers/env.ts.
#
# Written before the test engines start (their CDI cache reads the
# directory then, and watches it after); removed by env-teardown.sh, the
# directory too when the setup created it.

CDI_SPEC_DIR="${CRIDOCK_CDI_SPEC_DIR:-/etc/cdi}"
CDI_SPEC_FILE="$CDI_SPEC_DIR/cridock-test.json"
CDI_CONTENT_DIR="$ENV_STATE_DIR/cdi-content"
CDI_CREATED_DIR_MARK="$ENV_STATE_DIR/cdi-created-spec-dir"

ensure_cdi_test_device() {
  mkdir -p "$CDI_CONTENT_DIR"
  printf 'cridock CDI test mount\n' >"$CDI_CONTENT_DIR/hello.txt"
  if [[ ! -d "$CDI_SPEC_DIR" ]]; then
    mkdir -p "$CDI_SPEC_DIR"
    touch "$CDI_CREATED_DIR_MARK"
  fi
  local spec
  spec="$(cat <<JSON
{
  "cdiVersion": "0.6.0",
  "kind": "cridock.test/null",
  "devices": [
    {
      "name": "null0",
      "containerEdits": {
        "deviceNodes": [{ "path": "/dev/cridock-null", "type": "c", "major": 1, "minor": 3, "permissions": "rw" }],
        "mounts": [{ "hostPath": "$CDI_CONTENT_DIR", "containerPath": "/cdi-content", "options": ["ro", "bind"] }],
        "env": ["CRIDOCK_CDI_TEST=injected"]
      }
    }
  ]
}
JSON
)"
  if [[ "$(cat "$CDI_SPEC_FILE" 2>/dev/null)" != "$spec" ]]; then
    # Written whole and renamed, so the engines' spec watcher never reads half a file.
    printf '%s\n' "$spec" >"$CDI_SPEC_FILE.tmp"
    mv "$CDI_SPEC_FILE.tmp" "$CDI_SPEC_FILE"
    log "wrote the CDI test device spec $CDI_SPEC_FILE (cridock.test/null=null0)"
  fi
}

remove_cdi_test_device() {
  if [[ -f "$CDI_SPEC_FILE" ]]; then
    rm -f "$CDI_SPEC_FILE"
    log "removed $CDI_SPEC_FILE"
  fi
  if [[ -f "$CDI_CREATED_DIR_MARK" ]]; then
    rmdir "$CDI_SPEC_DIR" 2>/dev/null && log "removed $CDI_SPEC_DIR"
    rm -f "$CDI_CREATED_DIR_MARK"
  fi
  rm -rf "$CDI_CONTENT_DIR"
}
