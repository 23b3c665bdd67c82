/**
 * Finds the upstream CRI proto (k8s.io/cri-api at the version our proto
 * copies) in the Go module cache, downloading the module through Go's
 * default module proxy when it is not cached yet. Undefined when Go is absent.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const CRI_API_MODULE = "k8s.io/cri-api";
export const CRI_API_VERSION = "v0.37.2";
const PROTO_IN_MODULE = "pkg/apis/runtime/v1/api.proto";

export function upstreamProtoPath(): string | undefined {
  let modCache: string;
  try {
    modCache = execFileSync("go", ["env", "GOMODCACHE"], { encoding: "utf8" }).trim();
  } catch {
    return undefined;
  }
  const cached = join(modCache, `${CRI_API_MODULE}@${CRI_API_VERSION}`, PROTO_IN_MODULE);
  if (existsSync(cached)) return cached;
  // `go mod download` needs no module of its own for an explicit version.
  const scratch = mkdtempSync(join(tmpdir(), "cri-api-"));
  try {
    const out = execFileSync("go", ["mod", "download", "-json", `${CRI_API_MODULE}@${CRI_API_VERSION}`], {
      cwd: scratch,
      encoding: "utf8",
      timeout: 180_000,
    });
    const dir = (JSON.parse(out) as { Dir?: string }).Dir;
    const path = dir && join(dir, PROTO_IN_MODULE);
    return path && existsSync(path) ? path : undefined;
  } catch {
    return undefined;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
