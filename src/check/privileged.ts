/**
 * Whether this engine starts privileged containers on this host. cridock
 * leaves privileged pods to the engine (runtime/container/capabilities.ts):
 * on a host whose capability bounding set is not full, a current engine
 * grants a privileged container the capabilities the host has, while an old
 * one (Docker 20.10) asks for every capability it knows and fails to start.
 * No version number says which, so the check asks the engine what
 * RunPodSandbox of a privileged pod asks it: to create and start a privileged
 * container of the pause image. The container is removed at once, whatever
 * happened.
 */
import { randomBytes } from "node:crypto";
import type { DockerClient } from "../docker/client.ts";
import { describeCause } from "../errors.ts";
import { privilegedStartFailure } from "../runtime/container/capabilities.ts";
import type { NodeFacts, PrivilegedProbe } from "./evaluate.ts";

/** Marks the probe's container, so an operator who sees one left by a killed check knows whose it is. */
export const PRIVILEGED_PROBE_LABEL = "io.cridock.check";

export interface PrivilegedProbeInput {
  dockerUp: boolean;
  pause: NodeFacts["pause"];
  capabilities: NodeFacts["capabilities"];
}

export async function probePrivileged(docker: DockerClient, { dockerUp, pause, capabilities }: PrivilegedProbeInput): Promise<PrivilegedProbe> {
  if ("error" in capabilities || capabilities.missing.length === 0) return { tried: false, reason: "the bounding set is full" };
  if (!dockerUp) return { tried: false, reason: "dockerd does not answer" };
  if (!pause.present) return { tried: false, reason: `the pause image ${pause.image} is not present` };
  const name = `cridock-check-privileged-${randomBytes(6).toString("hex")}`;
  let id: string | undefined;
  try {
    ({ Id: id } = await docker.createContainer(name, {
      Image: pause.image,
      Labels: { [PRIVILEGED_PROBE_LABEL]: "privileged" },
      // No network, no log: only the start of a privileged process is in question.
      HostConfig: { Privileged: true, NetworkMode: "none", LogConfig: { Type: "none", Config: {} } },
    }));
    await docker.startContainer(id);
    return { tried: true, outcome: "started" };
  } catch (err) {
    // The runtime's own test of "the engine could not grant the capabilities".
    const refused = privilegedStartFailure(err, capabilities, "a privileged container");
    return refused ? { tried: true, outcome: "refused", message: describeCause(err) } : { tried: true, outcome: "error", message: describeCause(err) };
  } finally {
    // By name too: a create that timed out may still have made it.
    await docker.removeContainer(id ?? name, { force: true }).catch(() => undefined);
  }
}
