/**
 * scripts/k8s/conformance-e2e.sh: the flags scripts/k8s-conformance.sh hands
 * e2e.test. Many specs shell out to kubectl (sig-cli, and `kubectl exec` in
 * the Services, DNS and networking specs); they must run the kubectl built
 * with the cluster under test, never whatever `kubectl` the PATH finds.
 */
import t from "tap";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("../../", import.meta.url));

/** e2e.test's flags as the script builds them, with the tools under TOOLS. */
function e2eFlags(tools: string, dir: string): string[] {
  const script = [
    "set -euo pipefail",
    "source scripts/env/common.sh",
    "source scripts/k8s/cluster-common.sh",
    "source scripts/k8s/conformance-e2e.sh",
    'e2e_binary_flags "$1"',
    'printf "%s\\n" "${E2E_BINARY_FLAGS[@]}"',
  ].join("\n");
  const out = execFileSync("bash", ["-c", script, "bash", dir], {
    cwd: REPO,
    env: { PATH: "/usr/bin:/bin", CRIDOCK_TOOLS_DIR: tools, CRIDOCK_KUBERNETES_VERSION: "v1.36.3" },
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  return out.split("\n").filter((l) => l !== "");
}

t.test("e2e.test runs the cluster's own kubectl, not the PATH's", async (t) => {
  const flags = e2eFlags("/opt/tools", "/results/run-1");
  t.ok(flags.includes("--kubectl-path=/opt/tools/kubernetes/v1.36.3/bin/kubectl"), `flags: ${flags.join(" ")}`);
  t.equal(flags.filter((f) => f.startsWith("--kubectl-path=")).length, 1, "one kubectl path");
});

t.test("the cluster, its kubeconfig and the report directory", async (t) => {
  const flags = e2eFlags("/opt/tools", "/results/run-1");
  t.ok(flags.includes("--provider=local"));
  t.ok(flags.includes("--kubeconfig=/etc/kubernetes/admin.conf"), "kubeadm's admin kubeconfig");
  t.ok(flags.includes("--report-dir=/results/run-1"));
  t.ok(flags.includes("--non-blocking-taints=node-role.kubernetes.io/control-plane"));
});
