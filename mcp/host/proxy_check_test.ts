import { deepEqual, equal } from "node:assert/strict";
import {
  classifyProxy,
  healthOf,
  type HealthRead,
  PROXY_STATE_EXIT,
  PROXY_STATES,
  type ProxyFacts,
  type ProxyHealth,
  readProxyHealth,
  readServedCa,
  versionDrift,
} from "./proxy_check.ts";

const OWN = { version: "0.1.0", gitSha: "a".repeat(40), programDir: "/opt/isx" };
const H: ProxyHealth = {
  version: "0.1.0",
  gitSha: "a".repeat(40),
  pid: 42,
  caFingerprint: "AB:CD",
  dnsConfigured: true,
  programDir: "/opt/isx",
  listen: { tls: "10.77.0.1:443" },
};

Deno.test("versionDrift tells same build, restart, futile and legacy apart", () => {
  equal(versionDrift(H, OWN).kind, "none");
  equal(versionDrift({ ...H, gitSha: null }, OWN).kind, "none", "an unknown commit is no drift");
  equal(versionDrift({ ...H, gitSha: "b".repeat(40) }, OWN).kind, "restart");
  equal(versionDrift({ ...H, version: "0.0.9" }, OWN).kind, "restart");
  const futile = versionDrift({ ...H, version: "0.0.9", programDir: "/usr/lib/isx" }, OWN);
  equal(futile.kind, "futile");
  equal(JSON.stringify(futile).includes("/usr/lib/isx"), true);
  const { version: _, ...legacy } = H;
  equal(versionDrift(legacy, OWN).kind, "legacy");
});

const ok: HealthRead = { kind: "ok", health: H };
const base: ProxyFacts = {
  read: ok,
  dnsManaged: true,
  bridgeGateway: "10.77.0.1",
  pinnedGateway: undefined,
  dnsBlockGateway: "10.77.0.1",
};

const pend = (need: string) => ({ need, error: `${need}: HTTP 500`, attempts: 2 });

Deno.test("classifyProxy gives each of the seven states its case and exit code", () => {
  const cases: [Partial<ProxyFacts>, string][] = [
    [{}, "running"],
    [{ read: { kind: "ok", health: { ...H, dnsConfigured: false } } }, "waiting_for_dns"],
    [
      { read: { kind: "ok", health: { ...H, dnsConfigured: false } }, dnsManaged: false },
      "running",
    ],
    // a need still retried (issue 19): never running, the DNS one named as such
    [{ read: { kind: "ok", health: { ...H, converging: [pend("dns")] } } }, "waiting_for_dns"],
    [{ read: { kind: "ok", health: { ...H, converging: [pend("guard")] } } }, "converging"],
    [{ read: { kind: "ok", health: { ...H, converging: [pend("registry")] } } }, "converging"],
    [
      { read: { kind: "ok", health: { ...H, converging: [pend("dns")] } }, dnsManaged: false },
      "converging",
    ],
    [{ read: { kind: "ok", health: { ...H, converging: [] } } }, "running"],
    [{ read: { kind: "down" }, dnsBlockGateway: undefined }, "not_running"],
    [{ read: { kind: "down" } }, "stale_dns"],
    [{ read: { kind: "down" }, dnsManaged: false }, "not_running"],
    [{ bridgeGateway: "10.99.0.1" }, "stale_gateway"],
    [{ bridgeGateway: "10.99.0.1", pinnedGateway: "10.77.0.1" }, "running"],
    [{ bridgeGateway: undefined }, "running"],
    [{ read: { kind: "foreign", detail: "HTTP 500" } }, "unknown"],
  ];
  const seen = new Set<string>();
  for (const [patch, want] of cases) {
    const got = classifyProxy({ ...base, ...patch });
    equal(got.state, want, JSON.stringify(patch));
    seen.add(got.state);
  }
  equal(seen.size, PROXY_STATES.length);
  equal(PROXY_STATE_EXIT.running, 0);
  equal(PROXY_STATE_EXIT.not_running, 1);
  equal(PROXY_STATE_EXIT.stale_dns, 2);
  equal(PROXY_STATE_EXIT.converging, 2);
  const why = classifyProxy({
    ...base,
    read: { kind: "ok", health: { ...H, converging: [pend("conn_limit")] } },
  }).why;
  equal(why.includes("conn_limit (conn_limit: HTTP 500)"), true, why);
  equal(PROXY_STATE_EXIT.unknown, 3);
});

Deno.test("healthOf reads a /health body by its wire contract and refuses what is not one", () => {
  const ok = { pid: 1, caFingerprint: "AB" };
  const CASES: [unknown, boolean][] = [
    [ok, true],
    [H, true],
    [{ ...H, gitSha: null, authError: null, programDir: null }, true], // the nullable ones
    [{ ...ok, later: { any: "thing" } }, true], // a newer proxy's field is kept
    [{ ...ok, configDriftedFiles: ["a"], missingCredentials: [] }, true],
    [{ ...ok, listen: {} }, true],
    [{ caFingerprint: "AB" }, false], // pid is required
    [{ pid: 1 }, false], // and the CA's fingerprint
    [{ ...ok, pid: "1" }, false],
    [{ ...ok, version: null }, false], // not nullable
    [{ ...ok, dnsConfigured: "yes" }, false],
    [{ ...ok, configDriftedFiles: ["a", 1] }, false],
    [{ ...ok, listen: { tls: 443 } }, false],
    [{ ...ok, listen: [] }, false],
    [[ok], false],
    [null, false],
    ["health", false],
  ];
  for (const [body, good] of CASES) {
    const got = healthOf(body);
    equal(got !== undefined, good, JSON.stringify(body));
    if (good) equal(got, body); // the body itself, unknown fields included
  }
});

Deno.test("readProxyHealth and readServedCa read a real HTTP server on loopback, with the Host of the URL; nothing or not HTTP is down", async () => {
  const hosts: (string | null)[] = [];
  const ca = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    hosts.push(req.headers.get("host"));
    const path = new URL(req.url).pathname;
    if (path === "/health") return Response.json(H);
    if (path === "/ca.crt") return new Response(ca);
    return new Response("no", { status: 404 });
  });
  const url = `http://127.0.0.1:${server.addr.port}`;
  try {
    deepEqual(await readProxyHealth(url), { kind: "ok", health: H });
    equal(await readServedCa(url), ca);
    deepEqual(hosts, [`127.0.0.1:${server.addr.port}`, `127.0.0.1:${server.addr.port}`]);
  } finally {
    await server.shutdown();
  }
  // the port now closed: down
  deepEqual(await readProxyHealth(url), { kind: "down" });
  equal(await readServedCa(url), undefined);
  // a listener that answers something else than HTTP: down, not a hang
  const raw = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const serving = (async () => {
    for await (const c of raw) {
      await c.write(new TextEncoder().encode("SSH-2.0-OpenSSH\r\n\r\n")).catch(() => {});
      c.close();
    }
  })();
  try {
    deepEqual(await readProxyHealth(`http://127.0.0.1:${raw.addr.port}`), { kind: "down" });
  } finally {
    raw.close();
    await serving.catch(() => {});
  }
  // a listener that never answers: down within the read's 2 s
  const silent = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const holding = (async () => {
    for await (const c of silent) held.push(c);
  })();
  try {
    // (it returns at all: the 2 s deadline closed the connection)
    deepEqual(await readProxyHealth(`http://127.0.0.1:${silent.addr.port}`), { kind: "down" });
  } finally {
    silent.close();
    for (const c of held) c.close();
    await holding.catch(() => {});
  }
});

Deno.test("readProxyHealth calls a non-200 or a body that is not isx's foreign", async () => {
  let answer = (): Response => new Response("no", { status: 404 });
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => answer());
  const url = `http://127.0.0.1:${server.addr.port}`;
  try {
    deepEqual(await readProxyHealth(url), { kind: "foreign", detail: "HTTP 404" });
    answer = () => new Response("<html>");
    deepEqual(await readProxyHealth(url), { kind: "foreign", detail: "not JSON" });
    answer = () => Response.json({ hello: 1 });
    deepEqual(await readProxyHealth(url), {
      kind: "foreign",
      detail: "not an isx proxy /health body",
    });
  } finally {
    await server.shutdown();
  }
});
