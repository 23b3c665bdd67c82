// cridock's own announcements reach the same subscribers as Docker's events
// (a failed start, which Docker does not announce, must reach GetContainerEvents).
import t from "tap";
import { ContainerEventStream, type DockerContainerEvent } from "../../src/docker/events.ts";
import { createLogger } from "../../src/log.ts";

t.test("announce delivers to every subscriber, and a failing one does not stop the others", async (t) => {
  const stream = new ContainerEventStream(async () => (async function* () {})(), createLogger("fatal"));
  const seen: DockerContainerEvent[] = [];
  stream.subscribe(() => {
    throw new Error("a broken listener");
  });
  const unsubscribe = stream.subscribe((e) => seen.push(e));
  const event = { id: "c".repeat(64), action: "die", timeNanos: 1n, attributes: { "io.kubernetes.docker.type": "container" } };
  stream.announce(event);
  t.same(seen, [event]);
  unsubscribe();
  stream.announce(event);
  t.equal(seen.length, 1, "not after unsubscribing");
});
