# Sourced by the package builds and the release. cridock_version_of EXECUTABLE prints
# "<version> <commit>" as the executable's --version line says them
# ("cridock 0.2.0 (commit <40 hex>[-dirty])", src/version.ts), and fails when
# the line is not of that form or names no commit: a package says which
# commit it carries.
cridock_version_of() {
  local line
  line="$("$1" --version)" || return 1
  [[ "$line" =~ ^cridock\ ([0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+~-]*)\ \(commit\ ([0-9a-f]{40}(-dirty)?)\)$ ]] || return 1
  printf '%s %s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
}

# cridock_debian_version VERSION prints the Debian version of a semantic one:
# a pre-release's "-" becomes "~", so that 0.2.0~rc.1 sorts before 0.2.0 as
# 0.2.0-rc.1 does in semver (and a native package's version has no "-").
cridock_debian_version() {
  printf '%s\n' "${1/-/\~}"
}
