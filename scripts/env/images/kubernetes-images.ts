/**
 * The images `kubeadm init` deploys, built here from the binaries
 * scripts/env/install-kubernetes.sh compiled and from Debian packages, under the
 * names kubeadm asks for (`kubeadm config images list`), so the mirror serves
 * them and `kubeadm config images pull` works unchanged:
 *
 *   registry.k8s.io/kube-{apiserver,controller-manager,scheduler,proxy}:<k8s version>
 *   registry.k8s.io/etcd:<etcd version>   registry.k8s.io/coredns/coredns:<version>
 *
 * The pause image kubeadm also lists is cridock's default pause image, in
 * the test catalog (catalog.ts, pause.ts), served by env/setup.sh.
 *
 * Every input comes from the environment scripts/env/cluster-images.sh sets, so
 * the versions are written once (scripts/env/common.sh). They are
 * registry-only: the node's own dockerd only carries them to the mirror.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ImageSpec } from "./catalog.ts";
import type { LayerEntry } from "./layer.ts";
import { hostBinaryEntries, userlandEntries } from "./rootfs.ts";

const PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const MIRROR = "registry.k8s.io";

export interface KubernetesImageInputs {
  kubernetesVersion: string;
  etcdVersion: string;
  corednsVersion: string;
  /** Holds kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy and etcd. */
  kubernetesBinDir: string;
  /** Holds coredns. */
  corednsBinDir: string;
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: build the Kubernetes images through scripts/env/cluster-images.sh`);
  return value;
}

export function inputsFromEnv(): KubernetesImageInputs {
  return {
    kubernetesVersion: required("CRIDOCK_KUBERNETES_VERSION"),
    etcdVersion: required("CRIDOCK_ETCD_VERSION"),
    corednsVersion: required("CRIDOCK_COREDNS_VERSION"),
    kubernetesBinDir: required("CRIDOCK_KUBERNETES_BIN_DIR"),
    corednsBinDir: required("CRIDOCK_COREDNS_BIN_DIR"),
  };
}

function file(path: string, source: string): LayerEntry {
  return { kind: "file", path, content: readFileSync(source), mode: 0o755 };
}

/**
 * kube-proxy's iptables mode runs iptables, ip6tables (their -save and
 * -restore forms) and conntrack. They are Debian's, as this host installed
 * them (iptables and conntrack in ENV_PACKAGES), with the same nf_tables
 * backend the host's own rules use, so kube-proxy's chains and dockerd's
 * live in one ruleset. The match and target extensions are loaded with
 * dlopen, which ldd cannot see, so each one comes with the libraries it needs.
 */
export function netfilterToolEntries(): LayerEntry[] {
  const multi = "/usr/sbin/xtables-nft-multi";
  const entries: LayerEntry[] = [...hostBinaryEntries([multi, "/usr/sbin/conntrack"])];
  for (const family of ["iptables", "ip6tables"]) {
    for (const suffix of ["", "-save", "-restore"]) {
      entries.push({ kind: "symlink", path: `/usr/sbin/${family}${suffix}`, target: "xtables-nft-multi" });
      entries.push({ kind: "symlink", path: `/usr/sbin/${family}-nft${suffix}`, target: "xtables-nft-multi" });
    }
  }
  const extensions = `/usr/lib/${process.arch === "arm64" ? "aarch64" : "x86_64"}-linux-gnu/xtables`;
  const modules = readdirSync(extensions).filter((name) => name.endsWith(".so")).map((name) => join(extensions, name));
  entries.push(...hostBinaryEntries(modules));
  return entries;
}

/** A control-plane image: the binary where upstream's images keep it, and the usual empty directories. */
function component(name: string, tag: string, binDir: string): ImageSpec {
  return {
    tags: [`${MIRROR}/${name}:${tag}`],
    contents: () => [...userlandEntries(), file(`/usr/local/bin/${name}`, join(binDir, name))],
    config: { Env: [PATH_ENV] },
    registryOnly: true,
  };
}

export function kubernetesCatalog(inputs: KubernetesImageInputs): ImageSpec[] {
  const bin = inputs.kubernetesBinDir;
  return [
    component("kube-apiserver", inputs.kubernetesVersion, bin),
    component("kube-controller-manager", inputs.kubernetesVersion, bin),
    component("kube-scheduler", inputs.kubernetesVersion, bin),
    {
      tags: [`${MIRROR}/kube-proxy:${inputs.kubernetesVersion}`],
      contents: () => [
        ...userlandEntries(),
        ...netfilterToolEntries(),
        file("/usr/local/bin/kube-proxy", join(bin, "kube-proxy")),
        // iptables takes its lock here unless the pod mounts the host's.
        { kind: "dir", path: "/run" },
      ],
      config: { Env: [PATH_ENV] },
      registryOnly: true,
    },
    {
      tags: [`${MIRROR}/etcd:${inputs.etcdVersion}`],
      contents: () => [...userlandEntries(), file("/usr/local/bin/etcd", join(bin, "etcd")), { kind: "dir", path: "/var/lib/etcd" }],
      config: { Env: [PATH_ENV] },
      registryOnly: true,
    },
    {
      // kubeadm's Deployment gives only args, so the entrypoint is the image's, as upstream's.
      // It runs as root: upstream's non-root image binds port 53 through a file
      // capability on /coredns, which this image's layer does not carry; the
      // Deployment drops every capability but NET_BIND_SERVICE either way.
      tags: [`${MIRROR}/coredns/coredns:${inputs.corednsVersion}`],
      contents: () => [...userlandEntries(), file("/coredns", join(inputs.corednsBinDir, "coredns"))],
      config: { Entrypoint: ["/coredns"], Env: [PATH_ENV], ExposedPorts: { "53/tcp": {}, "53/udp": {} } },
      registryOnly: true,
    },
  ];
}
