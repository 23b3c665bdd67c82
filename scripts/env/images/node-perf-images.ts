/**
 * The image e2e_node.test's node performance specs (Density, Resource-usage)
 * run beside their pods: gcr.io/cadvisor/cadvisor at the tag the suite's
 * resource collector hard-codes (test/e2e_node/resource_collector.go), served
 * by the test environment's mirror under that name. Its program is the
 * cAdvisor stats server scripts/env/install-cadvisor.sh builds (static, so
 * the image holds it alone), with the entrypoint of upstream's image; the
 * pod's own arguments (--port, --housekeeping_interval, --profiling) follow.
 *
 * The input comes from the environment scripts/bench/node-perf.sh sets.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ImageSpec } from "./catalog.ts";

/** resource_collector.go's cadvisorImageName at Kubernetes v1.36. */
export const CADVISOR_IMAGE = "gcr.io/cadvisor/cadvisor:v0.47.2";

export function cadvisorBinDirFromEnv(): string {
  const dir = process.env.CRIDOCK_CADVISOR_BIN_DIR;
  if (!dir) throw new Error("CRIDOCK_CADVISOR_BIN_DIR is not set: build the node performance images through scripts/bench/node-perf.sh");
  if (!existsSync(join(dir, "cadvisor"))) throw new Error(`the cAdvisor stats server is missing: ${join(dir, "cadvisor")} does not exist`);
  return dir;
}

export function nodePerfCatalog(cadvisorBinDir: string): ImageSpec[] {
  return [
    {
      tags: [CADVISOR_IMAGE],
      contents: () => [{ kind: "file", path: "/usr/bin/cadvisor", content: readFileSync(join(cadvisorBinDir, "cadvisor")), mode: 0o755 }],
      config: {
        Entrypoint: ["/usr/bin/cadvisor", "-logtostderr"],
        Labels: { "cridock.test/node-perf-image": "cadvisor" },
      },
      registryOnly: true,
    },
  ];
}
