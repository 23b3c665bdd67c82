// Types of the undici modules src/docker/undici-pool.ts imports directly
// (undici ships types for its index only).
declare module "undici/lib/dispatcher/pool.js" {
  const Pool: typeof import("undici").Pool;
  export default Pool;
}
declare module "undici/lib/api/api-request.js" {
  import type { Dispatcher } from "undici";
  function request(this: Dispatcher, options: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData>;
  export default request;
}
declare module "undici/lib/api/api-upgrade.js" {
  import type { Dispatcher } from "undici";
  function upgrade(this: Dispatcher, options: Dispatcher.UpgradeOptions & { body?: string }): Promise<Dispatcher.UpgradeData>;
  export default upgrade;
}
declare module "undici/lib/core/errors.js" {
  const errors: typeof import("undici").errors;
  export default errors;
}
