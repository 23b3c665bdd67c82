/**
 * The running kernel's release ("6.12.57+deb13-amd64", as uname and
 * dockerd's /info give it) against a minimum: which kernel features a node
 * has (recursive read-only mounts, idmapped layers) is decided from it.
 */
export function kernelAtLeast(release: string, major: number, minor: number): boolean {
  const m = /^(\d+)\.(\d+)/.exec(release);
  if (!m) return false;
  const [maj, min] = [Number(m[1]), Number(m[2])];
  return maj > major || (maj === major && min >= minor);
}
