/**
 * Shared pieces of the image-service integration tests: a direct Docker
 * Engine API reader (to compare cridock's answers with dockerd's), and a
 * snapshot of the test images' state to assert nothing leaked or went missing.
 */
import { request } from "node:http";
import { connect, createServer as createNetServer, type Socket } from "node:net";
import { join } from "node:path";
import type { CriClient } from "../../helpers/cri-client.ts";
import { TEST_DOCKER_SOCKET } from "../../helpers/env.ts";

export const DOCKER_SOCKET = TEST_DOCKER_SOCKET;
export const ZERO_ID = "0".repeat(64);

export interface DockerAnswer<T> {
  status: number;
  body: T;
}

/** One request to dockerd (bounded by a 30 s timeout). */
export function dockerApi<T = unknown>(method: string, path: string): Promise<DockerAnswer<T>> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: DOCKER_SOCKET, path, method, timeout: 30_000 }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => {
        let body: unknown = text;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          // plain text answer
        }
        resolve({ status: res.statusCode ?? 0, body: body as T });
      });
    });
    req.on("timeout", () => req.destroy(new Error(`dockerd did not answer ${method} ${path} in 30 s`)));
    req.on("error", reject);
    req.end();
  });
}

/**
 * Whether the engine keeps images in containerd (Docker 29's default for new
 * installs): its content store keeps a removed image's blobs until they are
 * garbage collected, so pulling it again may download nothing.
 */
export async function usesContainerdStore(): Promise<boolean> {
  const { body } = await dockerApi<{ DriverStatus?: [string, string][] }>("GET", "/info");
  return (body.DriverStatus ?? []).some(([key, value]) => key === "driver-type" && value.startsWith("io.containerd.snapshotter"));
}

export interface DockerImage {
  Id: string;
  RepoTags: string[] | null;
  RepoDigests: string[] | null;
  Size: number;
  Config: { User?: string } | null;
}

/** dockerd's inspect of `reference`, or undefined when it has no such image. */
export async function dockerInspect(reference: string): Promise<DockerImage | undefined> {
  const answer = await dockerApi<DockerImage>("GET", `/images/${encodeURIComponent(reference)}/json`);
  if (answer.status === 404) return undefined;
  if (answer.status !== 200) throw new Error(`docker inspect ${reference}: HTTP ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

/** The ids and names that `references` resolve to in dockerd, for before/after comparisons. */
export async function imageState(references: string[]): Promise<Record<string, string | null>> {
  const state: Record<string, string | null> = {};
  for (const reference of references) state[reference] = (await dockerInspect(reference))?.Id ?? null;
  return state;
}

/** Pulls each reference through cridock (so a test can start from, and end at, "present"). */
export async function pullAll(client: CriClient, references: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const image of references) ids.push((await client.imageCall("PullImage", { image: { image } })).imageRef);
  return ids;
}

/** "127.0.0.1:5000/x/y:1" → "127.0.0.1:5000/x/y". */
export function repositoryOf(reference: string): string {
  const at = reference.indexOf("@");
  const name = at >= 0 ? reference.slice(0, at) : reference;
  const colon = name.lastIndexOf(":");
  return colon > name.lastIndexOf("/") ? name.slice(0, colon) : name;
}

export interface DockerProxy {
  /** Pass as --docker-endpoint. */
  endpoint: string;
  /**
   * Open connections whose latest request is a POST /images/create of
   * `fromImage` (Docker's repository parameter). HTTP/1.1 cannot cancel a
   * request but by closing its connection, so 0 after an abort means cridock
   * closed it. A connection kept alive after a finished pull of another image
   * is not counted: cridock's pool keeps idle connections for 30 s, longer
   * than a test waits.
   */
  openPulls(fromImage: string): number;
  /**
   * How many POST /images/create requests went through, of `fromImage` when
   * given (kept-alive connections carry several). A call whose client gave up
   * at once can still reach dockerd a moment later, so a test counts its own
   * image's pulls.
   */
  pullRequests(fromImage?: string): number;
  close(): Promise<void>;
}

/** The request line at the start of a chunk: a new request on its connection. */
const REQUEST_LINE = /^([A-Z]+) (\S+) HTTP\/1\.1\r\n/;

/**
 * A unix-socket proxy in front of dockerd that watches which image each
 * connection's latest request pulls, so a test can see cridock close the
 * request of a pull it aborted.
 */
export async function dockerProxy(dir: string): Promise<DockerProxy> {
  const path = join(dir, "docker-proxy.sock");
  /** Each open connection's latest request, when it is a pull: its fromImage. */
  const pulling = new Map<Socket, string>();
  const pullRequests = new Map<string, number>();
  const all = new Set<Socket>();
  const server = createNetServer((client) => {
    const upstream = connect(DOCKER_SOCKET);
    all.add(client);
    client.on("data", (chunk: Buffer) => {
      const line = REQUEST_LINE.exec(chunk.subarray(0, 2048).toString("latin1"));
      if (!line) return;
      const target = new URL(line[2]!, "http://docker");
      if (line[1] !== "POST" || !/^\/v[\d.]+\/images\/create$/.test(target.pathname)) {
        pulling.delete(client);
        return;
      }
      const fromImage = target.searchParams.get("fromImage") ?? "";
      pullRequests.set(fromImage, (pullRequests.get(fromImage) ?? 0) + 1);
      pulling.set(client, fromImage);
    });
    client.pipe(upstream).pipe(client);
    const done = () => {
      pulling.delete(client);
      all.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on("close", done).on("error", done);
    upstream.on("close", done).on("error", done);
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return {
    endpoint: `unix://${path}`,
    openPulls: (fromImage) => [...pulling.values()].filter((image) => image === fromImage).length,
    pullRequests: (fromImage) =>
      fromImage === undefined ? [...pullRequests.values()].reduce((sum, n) => sum + n, 0) : (pullRequests.get(fromImage) ?? 0),
    async close() {
      for (const s of all) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
