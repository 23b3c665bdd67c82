/**
 * One pull per image at a time. When 30 pods start at once on a node that
 * lacks the pause image, each RunPodSandbox finds it missing; without this
 * every one of them asks dockerd for the same pull. Callers with the same key
 * (image and credentials) now wait on the pull already under way.
 *
 * Each caller keeps its own cancellation: a caller whose signal aborts stops
 * waiting at once, and the pull itself is aborted only when no caller is left
 * waiting for it, so one cancelled RunPodSandbox or PullImage never fails the
 * others.
 */

interface Flight<T> {
  result: Promise<T>;
  controller: AbortController;
  waiters: number;
}

export class SharedPulls<T> {
  private readonly flights = new Map<string, Flight<T>>();

  /** Pulls in flight (for tests). */
  get size(): number {
    return this.flights.size;
  }

  /** Runs `pull` for `key`, or joins the one already running; `signal` cancels this caller's wait. */
  run(key: string, signal: AbortSignal | undefined, pull: (signal: AbortSignal) => Promise<T>): Promise<T> {
    signal?.throwIfAborted();
    let flight = this.flights.get(key);
    if (!flight) {
      const controller = new AbortController();
      const created: Flight<T> = { controller, waiters: 0, result: Promise.resolve(undefined as T) };
      created.result = (async () => {
        try {
          return await pull(controller.signal);
        } finally {
          if (this.flights.get(key) === created) this.flights.delete(key);
        }
      })();
      // A flight nobody waits for any more may still settle with an error: it is handled here.
      created.result.catch(() => undefined);
      this.flights.set(key, created);
      flight = created;
    }
    return this.wait(key, flight, signal);
  }

  private wait(key: string, flight: Flight<T>, signal: AbortSignal | undefined): Promise<T> {
    flight.waiters++;
    return new Promise<T>((resolve, reject) => {
      let done = false;
      const finish = (): boolean => {
        if (done) return false;
        done = true;
        flight.waiters--;
        signal?.removeEventListener("abort", onAbort);
        return true;
      };
      const onAbort = () => {
        if (!finish()) return;
        if (flight.waiters === 0 && !flight.controller.signal.aborted) {
          // No one wants it any more: stop the pull, and let the next caller start afresh.
          if (this.flights.get(key) === flight) this.flights.delete(key);
          flight.controller.abort(signal!.reason);
        }
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      flight.result.then(
        (value) => finish() && resolve(value),
        (err: unknown) => finish() && reject(err),
      );
    });
  }
}
