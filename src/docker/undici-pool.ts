/**
 * The part of undici the Docker client uses: a connection pool over a unix
 * socket, its request and upgrade calls, and its error classes, imported
 * from undici's own modules rather than its index. The index also builds
 * fetch, WebSocket, EventSource, the caches, cookies and the mock agents,
 * which cridock never calls: about 9 MB of resident memory in an idle
 * process (test/unit/startup-modules.test.ts keeps them out).
 *
 * The index attaches request() and upgrade() to every dispatcher's
 * prototype; here they are called on the pool instead, so no prototype of
 * undici's is changed. The paths are undici 7's layout (package-lock.json
 * pins the version).
 *
 * undici parses HTTP with llhttp compiled to WebAssembly. V8 first compiles
 * it with its baseline compiler (Liftoff), then recompiles its hot
 * functions with the optimizing one (TurboFan) on a background thread: for
 * llhttp's one large state-machine function that took about 35 MB of
 * compiler memory, a startup peak of 100 MB RSS of which glibc kept 10 MB or
 * more for good. cridock parses only Docker's short answers and the event
 * stream's lines with it (followed logs are read from files, hijacked
 * streams are not HTTP), so the baseline code is enough: --liftoff-only
 * keeps V8 from tiering up. It works only as a start option: the executable
 * starts V8 with it (v8-start-options.ts), Deno takes it in --v8-flags. V8
 * 14 (Node 26) accepts it at run time (node:v8's setFlagsFromString) and
 * tiers up all the same, so nothing here tries; on the npm package and the
 * sources through tsx, llhttp tiers up unless node itself is started with
 * it (test/unit/docker-wasm-tier.test.ts asks V8). cridock runs no other
 * WebAssembly.
 */
import type { Dispatcher, Pool as PoolClass } from "undici";
import PoolImpl from "undici/lib/dispatcher/pool.js";
import apiRequest from "undici/lib/api/api-request.js";
import apiUpgrade from "undici/lib/api/api-upgrade.js";
import undiciErrors from "undici/lib/core/errors.js";

export type Pool = PoolClass;
export const Pool: typeof PoolClass = PoolImpl;
export const UndiciError = undiciErrors.UndiciError;

/** A request through `pool`; the answer's body is the caller's to consume. */
export function poolRequest(pool: Pool, options: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData> {
  return apiRequest.call(pool, options);
}

/**
 * An upgraded connection through `pool`. undici passes `body` on to the
 * dispatcher although UpgradeOptions does not declare it; Docker's exec
 * start and attach need the JSON body.
 */
export function poolUpgrade(pool: Pool, options: Dispatcher.UpgradeOptions & { body?: string }): Promise<Dispatcher.UpgradeData> {
  return apiUpgrade.call(pool, options);
}
