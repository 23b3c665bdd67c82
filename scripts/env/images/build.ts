/**
 * Builds every catalog image, loads into dockerd those it lacks (or holds
 * at a different id), and pushes the local-registry tags that the registry
 * lacks. Builds are reproducible, so the image id is the hash stamp: an
 * unchanged catalog and unchanged host binaries give the same ids and
 * nothing is loaded or pushed again.
 *
 * The engine is the one CRIDOCK_TEST_DOCKER_ENDPOINT names, as for the
 * tests: test/helpers/env.ts (imported below) points DOCKER_HOST at it, and
 * the docker CLI follows DOCKER_HOST; a DOCKER_HOST set by the caller alone
 * would be overwritten. So the same script loads the images into any engine;
 * --load-only leaves the registries alone (the node's engine pushed
 * already). At the end every tag is checked in the engine, so a setup that
 * loaded into the wrong engine fails here rather than in a test. The containerd image store reports a manifest
 * digest as the image id, never the config digest built here, so each
 * engine's loads are also recorded (tag → built id and the id the engine
 * gave it) and an image counts as loaded when either matches.
 *
 * `--set kubernetes` builds the images a kubeadm cluster deploys
 * (kubernetes-images.ts) instead of the test catalog; scripts/env/cluster-images.sh
 * runs it once the Kubernetes binaries are built. `--set conformance` builds
 * the images Kubernetes' e2e suites pull (conformance-images.ts;
 * scripts/env/conformance-images.sh runs it). `--set node-perf` builds the
 * cAdvisor image of the node performance specs (node-perf-images.ts;
 * scripts/bench/node-perf.sh runs it).
 *
 * Usage: tsx scripts/env/images/build.ts [--state-dir DIR] [--load-only] [--set test|kubernetes|conformance|node-perf]
 */
import { execFile } from "node:child_process";
import { request } from "node:https";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs, promisify } from "node:util";
import {
  AUTH_REGISTRY,
  ENV_STATE_DIR,
  MIRROR_CA_FILE,
  MIRRORED_REGISTRIES,
  REGISTRY,
  TEST_DOCKER_ENDPOINT,
  authRegistry,
  type RegistryCredentials,
} from "../../../test/helpers/env.ts";
import { CATALOG, type ImageSpec } from "./catalog.ts";
import { conformanceCatalog, conformanceInputsFromEnv } from "./conformance-images.ts";
import { inputsFromEnv, kubernetesCatalog } from "./kubernetes-images.ts";
import { cadvisorBinDirFromEnv, nodePerfCatalog } from "./node-perf-images.ts";
import { imageConfig, writeDockerArchive, type BuiltImage } from "./docker-archive.ts";
import { buildLayer } from "./layer.ts";

const run = promisify(execFile);

/** Runs the docker CLI; on failure the error names the command and carries its output. */
async function docker(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  try {
    const { stdout } = await run("docker", args, { env, maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(`docker ${args.join(" ")} failed: ${(e.stderr || e.stdout || e.message).trim()}`);
  }
}

async function localImageId(tag: string): Promise<string | null> {
  try {
    return (await docker(["image", "inspect", "--format", "{{.Id}}", tag])).trim();
  } catch {
    return null;
  }
}

/** "127.0.0.1:5000/cridock-test/busybox:1.36" → registry, repository, tag (every catalog tag names its registry and tag). */
function splitReference(reference: string): { registry: string; repository: string; tag: string } {
  const slash = reference.indexOf("/");
  const rest = reference.slice(slash + 1);
  const colon = rest.lastIndexOf(":");
  return { registry: reference.slice(0, slash), repository: rest.slice(0, colon), tag: rest.slice(colon + 1) };
}

function isMirrorTag(tag: string): boolean {
  return (MIRRORED_REGISTRIES as readonly string[]).includes(tag.slice(0, tag.indexOf("/")));
}

/** Tags that live in a registry of the test environment: the two local ones and the mirror. */
function isRegistryTag(tag: string): boolean {
  return tag.startsWith(`${REGISTRY}/`) || tag.startsWith(`${AUTH_REGISTRY}/`) || isMirrorTag(tag);
}

const MANIFEST_TYPES = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json";

/** HEAD of a manifest on the mirror, over TLS with the mirror's CA (the host resolves through /etc/hosts). */
function mirrorHas(url: string, ca: Buffer): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(url, { method: "HEAD", ca, headers: { accept: MANIFEST_TYPES }, timeout: 10_000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", () => resolve(false));
    req.end();
  });
}

let mirrorCa: Buffer | null = null;

/** Whether the registry serves a manifest for the tag (bounded: one request, 10 s). */
async function registryHas(reference: string, credentials: RegistryCredentials | null): Promise<boolean> {
  const { registry, repository, tag } = splitReference(reference);
  if (isMirrorTag(reference)) {
    mirrorCa ??= await readFile(MIRROR_CA_FILE);
    return mirrorHas(`https://${registry}/v2/${repository}/manifests/${tag}`, mirrorCa);
  }
  const headers: Record<string, string> = { accept: MANIFEST_TYPES };
  if (credentials) headers.authorization = `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64")}`;
  try {
    const res = await fetch(`http://${registry}/v2/${repository}/manifests/${tag}`, {
      method: "HEAD",
      headers,
      signal: AbortSignal.timeout(10_000),
    });
    return res.ok;
  } catch {
    return false;
  }
}

/** Pushes with a throwaway docker config holding the auth registry's credentials, so ~/.docker is untouched. */
async function push(reference: string, credentials: RegistryCredentials | null): Promise<void> {
  if (!credentials) {
    await docker(["push", reference]);
    return;
  }
  const configDir = await mkdtemp(join(tmpdir(), "cridock-docker-config-"));
  try {
    const auth = Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64");
    await writeFile(join(configDir, "config.json"), JSON.stringify({ auths: { [credentials.address]: { auth } } }), { mode: 0o600 });
    await docker(["--config", configDir, "push", reference]);
  } finally {
    await rm(configDir, { recursive: true, force: true });
  }
}

async function build(spec: ImageSpec): Promise<BuiltImage> {
  const layer = await buildLayer(spec.contents());
  return imageConfig(spec.config, [layer], `cridock scripts/env/images: ${spec.tags[0]}`);
}

type PushedStamp = Record<string, string>;
/** tag → [built image id, the id the engine reports for it]. */
type LoadedStamp = Record<string, [string, string]>;

/** One stamp file per engine: "loaded-unix-run-cridock-env-docker29-docker.sock.json". */
function loadedStampPath(imagesDir: string): string {
  return join(imagesDir, `loaded-${TEST_DOCKER_ENDPOINT.replace(/[^A-Za-z0-9.]+/g, "-")}.json`);
}

async function readStamp<T>(path: string): Promise<Record<string, T>> {
  try {
    return JSON.parse(await readFile(path, "utf8")) as Record<string, T>;
  } catch {
    return {};
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      "state-dir": { type: "string", default: ENV_STATE_DIR },
      "load-only": { type: "boolean", default: false },
      set: { type: "string", default: "test" },
    },
  });
  const catalogs: Record<string, () => ImageSpec[]> = {
    test: () => CATALOG,
    kubernetes: () => kubernetesCatalog(inputsFromEnv()),
    conformance: () => conformanceCatalog(conformanceInputsFromEnv()),
    "node-perf": () => nodePerfCatalog(cadvisorBinDirFromEnv()),
  };
  const choose = catalogs[values.set!];
  if (!choose) throw new Error(`unknown image set "${values.set}" (${Object.keys(catalogs).join(", ")})`);
  const catalog = choose();
  const loadOnly = values["load-only"]!;
  const imagesDir = join(values["state-dir"]!, "images");
  await mkdir(imagesDir, { recursive: true });
  const stampPath = join(imagesDir, "pushed.json");
  const pushed: PushedStamp = await readStamp<string>(stampPath);
  const loadedPath = loadedStampPath(imagesDir);
  const loaded: LoadedStamp = await readStamp<[string, string]>(loadedPath);
  const isLoaded = (tag: string, id: string | null, built: string) =>
    id === built || (id !== null && loaded[tag]?.[0] === built && loaded[tag]?.[1] === id);
  const credentials = catalog.some((s) => s.tags.some((t) => t.startsWith(`${AUTH_REGISTRY}/`))) ? await authRegistry() : null;

  const credentialsFor = (tag: string) => (tag.startsWith(`${AUTH_REGISTRY}/`) ? credentials : null);

  for (const [index, spec] of catalog.entries()) {
    if (loadOnly && spec.registryOnly) continue;
    const image = await build(spec);
    const toPush: string[] = [];
    for (const tag of loadOnly ? [] : spec.tags.filter(isRegistryTag)) {
      if (pushed[tag] !== image.id || !(await registryHas(tag, credentialsFor(tag)))) toPush.push(tag);
    }
    const ids = await Promise.all(spec.tags.map(localImageId));
    const needsLoad = spec.registryOnly ? toPush.length > 0 : spec.tags.some((tag, i) => !isLoaded(tag, ids[i] ?? null, image.id));
    if (needsLoad) {
      const archive = join(imagesDir, `image-${values.set}-${index}.tar`);
      await writeDockerArchive(archive, image, spec.tags);
      await docker(["load", "--quiet", "--input", archive]);
      await rm(archive, { force: true });
      if (!spec.registryOnly) {
        for (const tag of spec.tags) {
          const id = await localImageId(tag);
          if (id) loaded[tag] = [image.id, id];
        }
        await writeFile(loadedPath, JSON.stringify(loaded, null, 2) + "\n");
      }
      console.log(`loaded ${spec.tags.join(", ")} (${image.id.slice(0, 19)})`);
    }
    for (const tag of toPush) {
      await push(tag, credentialsFor(tag));
      pushed[tag] = image.id;
      await writeFile(stampPath, JSON.stringify(pushed, null, 2) + "\n");
      console.log(`pushed ${tag}`);
    }
    if (spec.registryOnly && needsLoad) await docker(["image", "rm", ...spec.tags]);
  }
  const missing: string[] = [];
  for (const spec of catalog) {
    if (spec.registryOnly) continue;
    for (const tag of spec.tags) if ((await localImageId(tag)) === null) missing.push(tag);
  }
  if (missing.length > 0) throw new Error(`after loading, ${TEST_DOCKER_ENDPOINT} lacks ${missing.join(", ")}`);
}

main().catch((err: Error) => {
  console.error(`image build failed: ${err.message}`);
  process.exit(1);
});
