// Services on cridock's pod network: a ClusterIP Service reached by its DNS
// name from another pod, a pod reaching its own Service (hairpin), a
// NodePort reached from the host, the API server reached from a pod
// as kubernetes.default with the pod's service-account token, and traffic to
// a ClusterIP port no Service serves refused (scripts/k8s/cluster-common.sh,
// add_service_reject) rather than sent out by the default route.
import dgram from "node:dgram";
import t from "tap";
import { apply, getJson, kubectl, run, testNamespace, unservedPortRefused, waitFor, waitPodReady, DNS_DOMAIN, NODE_NAME } from "./harness/cluster.ts";
import { CURL_IMAGE, HTTPD_IMAGE } from "../helpers/env.ts";

const ns = await testNamespace(t, "net");
const INDEX = "cridock test httpd";

await apply(
  ns,
  {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web", labels: { app: "web" } },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [
        { name: "httpd", image: HTTPD_IMAGE, ports: [{ containerPort: 80 }], readinessProbe: { tcpSocket: { port: 80 }, periodSeconds: 1 } },
        // The same pod (same IP) as httpd: its requests to the Service may come back to itself.
        { name: "curl", image: CURL_IMAGE, command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"] },
      ],
    },
  },
  { apiVersion: "v1", kind: "Service", metadata: { name: "web" }, spec: { selector: { app: "web" }, ports: [{ port: 8080, targetPort: 80 }] } },
  { apiVersion: "v1", kind: "Service", metadata: { name: "web-nodeport" }, spec: { type: "NodePort", selector: { app: "web" }, ports: [{ port: 80 }] } },
  {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "client" },
    spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "curl", image: CURL_IMAGE, command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"] }] },
  },
);
await waitPodReady(ns, "web");
await waitPodReady(ns, "client");

/**
 * curl from inside a pod (Debian's busybox wget crashes); retried while the
 * Service's endpoints and rules settle.
 */
async function fetchFrom(pod: string, url: string): Promise<string> {
  return waitFor(`${pod} to fetch ${url}`, async () => {
    const res = await kubectl(["-n", ns, "exec", pod, "-c", "curl", "--", "curl", "-sf", "--max-time", "5", url]);
    return res.code === 0 ? res.stdout : undefined;
  }, 60_000);
}

t.test("a ClusterIP Service answers by its DNS name from another pod", async (t) => {
  const fqdn = `web.${ns}.svc.${DNS_DOMAIN}`;
  const service = await getJson(["-n", ns, "service", "web"]);
  const lookup = await waitFor("the Service's name to resolve", async () => {
    const res = await kubectl(["-n", ns, "exec", "client", "--", "nslookup", fqdn]);
    return res.code === 0 ? res.stdout : undefined;
  }, 60_000);
  t.match(lookup, service.spec.clusterIP, `${fqdn} resolves to the ClusterIP`);
  t.match(await fetchFrom("client", `http://${fqdn}:8080/`), INDEX);
  t.match(await fetchFrom("client", "http://web:8080/"), INDEX, "the short name through the pod's search path");
});

t.test("a pod reaches itself through its own Service (hairpin)", async (t) => {
  // By the full name: the short one is the pod's own hostname in its /etc/hosts.
  t.match(await fetchFrom("web", `http://web.${ns}.svc.${DNS_DOMAIN}:8080/`), INDEX);
});

t.test("a NodePort answers from the host on the node's address", async (t) => {
  const service = await getJson(["-n", ns, "service", "web-nodeport"]);
  const port = service.spec.ports[0].nodePort;
  const node = await getJson(["node", NODE_NAME]);
  const address = node.status.addresses.find((a: any) => a.type === "InternalIP").address;
  const body = await waitFor(`http://${address}:${port}/`, async () => {
    const res = await run("curl", ["-sf", "--max-time", "5", `http://${address}:${port}/`]);
    return res.code === 0 ? res.stdout : undefined;
  }, 60_000);
  t.match(body, INDEX);
});

t.test("kubernetes.default answers a pod with its service-account token, and nobody without one", async (t) => {
  const sa = "/var/run/secrets/kubernetes.io/serviceaccount";
  const call = (path: string, withToken: boolean) =>
    kubectl(["-n", ns, "exec", "client", "--", "sh", "-c",
      `curl -s --max-time 10 --cacert ${sa}/ca.crt ${withToken ? `-H "Authorization: Bearer $(cat ${sa}/token)"` : ""} -o /dev/null -w '%{http_code}' https://kubernetes.default.svc${path}`]);
  // The pod's own namespace may be read by name only with rights it lacks: 403 shows the token was accepted and RBAC decided.
  const own = await call(`/api/v1/namespaces/${ns}/pods`, true);
  t.equal(own.stdout, "403", `authenticated as the pod's service account, refused by RBAC (${own.stderr})`);
  const version = await call("/version", true);
  t.equal(version.stdout, "200", "the server's version is open to any authenticated client");
  // kubeadm's API server authenticates a request without credentials as system:anonymous, which RBAC refuses.
  const anonymous = await call(`/api/v1/namespaces/${ns}/pods`, false);
  t.equal(anonymous.stdout, "403", "anonymous refused (and the CA check passed: kubernetes.default.svc is in the serving certificate)");
  const whoami = await kubectl(["-n", ns, "exec", "client", "--", "sh", "-c",
    `curl -s --max-time 10 --cacert ${sa}/ca.crt -H "Authorization: Bearer $(cat ${sa}/token)" -H 'Content-Type: application/json' -X POST -d '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}' https://kubernetes.default.svc/apis/authentication.k8s.io/v1/selfsubjectreviews`]);
  t.equal(JSON.parse(whoami.stdout).status.userInfo.username, `system:serviceaccount:${ns}:default`);
});

/**
 * A UDP datagram from the host to a ClusterIP port no Service serves: the
 * first error the socket reports, or undefined when none came within 2 s.
 * The node's reject rule (ICMP port unreachable, in OUTPUT) fails the send
 * itself with EPERM.
 */
function udpError(ip: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = dgram.createSocket("udp4");
    let settled = false;
    const done = (code: string | undefined) => {
      if (settled) return;
      settled = true;
      socket.close();
      resolve(code);
    };
    socket.on("error", (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
    socket.connect(port, ip, () => {
      socket.send("cridock", (err) => {
        if (err) done((err as NodeJS.ErrnoException).code ?? err.message);
        else setTimeout(() => done(undefined), 2_000);
      });
    });
  });
}

t.test("a ClusterIP port no Service serves is refused at once, not sent out by the default route", async (t) => {
  // kube-proxy (iptables mode) translates only port 8080 of this ClusterIP;
  // without the node's reject rule a connection to port 81 leaves
  // untranslated by the default route (and a network that answers every
  // outbound connection accepts it).
  const service = await getJson(["-n", ns, "service", "web"]);
  const ip: string = service.spec.clusterIP;
  await unservedPortRefused(t, "from a pod", ip, 81, (args) => kubectl(["-n", ns, "exec", "client", "--", ...args]));
  await unservedPortRefused(t, "from the node", ip, 81, (args) => run(args[0]!, args.slice(1)));
  // EPERM on the send: refused by the node itself. A network beyond it may
  // answer with its own port unreachable (ECONNREFUSED after the send), as
  // this test machine's does, which says the datagram left.
  t.equal(await udpError(ip, 81), "EPERM", `UDP from the node to ${ip}:81 is refused before it leaves the node`);
  // The served port still works from the node (the rule sees traffic after kube-proxy's DNAT).
  const served = await run("curl", ["-s", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", `http://${ip}:8080/`]);
  t.equal(served.stdout, "200", `the served port answers from the node (${served.stderr})`);
});
