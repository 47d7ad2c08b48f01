import assert from "node:assert/strict";
import { IsbError } from "../errors.ts";
import { checkRemote, normalizeUrl, parseRemotes, resolveRemote } from "./remote.ts";
import type { ServerInfo } from "./types.ts";

const CONF = "/home/u/.config/incus";
const CONFIG = `default-remote: local
remotes:
  images:
    addr: https://images.linuxcontainers.org
    protocol: simplestreams
    public: true
  local:
    addr: unix://
    protocol: incus
  other-sock:
    addr: unix:///run/incus/unix.socket
    protocol: incus
  lab:
    addr: https://10.0.0.5:8443
    protocol: incus
    auth_type: tls
  noport:
    addr: https://lab.example
    protocol: incus
  weird:
    addr: tcp://x
    protocol: incus
  team:
    addr: https://10.0.0.6:8443
    protocol: incus
    project: dev
`;
const FILES: Record<string, string> = {
  [`${CONF}/config.yml`]: CONFIG,
  [`${CONF}/client.crt`]: "CLIENT CERT",
  [`${CONF}/client.key`]: "CLIENT KEY",
  [`${CONF}/servercerts/lab.crt`]: "LAB CERT",
};
const opts = (files: Record<string, string> = FILES) => ({
  confDir: CONF,
  socket: "/var/lib/incus/unix.socket",
  read: (p: string) => files[p],
});
function refused(code: string, pattern: RegExp) {
  return (e: unknown) => e instanceof IsbError && e.code === code && pattern.test(e.message);
}

Deno.test("resolveRemote maps a named https remote to its URL, client identity and pinned server certificate", () => {
  assert.deepEqual(resolveRemote("lab", opts()), {
    url: "https://10.0.0.5:8443",
    tls: { cert: "CLIENT CERT", key: "CLIENT KEY", caCerts: ["LAB CERT"] },
  });
});

Deno.test("resolveRemote carries the remote's own project, except default", () => {
  assert.equal(resolveRemote("team", opts()).project, "dev");
  const plain = parseRemotes(
    "remotes:\n  a: {addr: 'https://h', protocol: incus, project: default}",
    "/c",
  );
  assert.equal(plain.a?.project, "default");
  assert.equal(
    "project" in
      resolveRemote(
        "a",
        opts({
          ...FILES,
          [`${CONF}/config.yml`]: "remotes:\n  a: {addr: 'https://h', project: default}",
        }),
      ),
    false,
  );
});

Deno.test("resolveRemote uses the system roots when no server certificate was pinned, and port 8443 by default", () => {
  assert.deepEqual(resolveRemote("noport", opts()), {
    url: "https://lab.example:8443",
    tls: { cert: "CLIENT CERT", key: "CLIENT KEY" },
  });
});

Deno.test("resolveRemote maps unix:// remotes (and local) to a socket", () => {
  assert.deepEqual(resolveRemote("local", opts()), { socket: "/var/lib/incus/unix.socket" });
  assert.deepEqual(resolveRemote("other-sock", opts()), { socket: "/run/incus/unix.socket" });
  assert.deepEqual(resolveRemote("local", opts({})), { socket: "/var/lib/incus/unix.socket" });
});

Deno.test("resolveRemote takes an https URL with the client identity and the certificate of the remote at that address", () => {
  assert.deepEqual(resolveRemote("https://10.0.0.5:8443/", opts()), {
    url: "https://10.0.0.5:8443",
    tls: { cert: "CLIENT CERT", key: "CLIENT KEY", caCerts: ["LAB CERT"] },
  });
  assert.deepEqual(resolveRemote("https://10.9.9.9", opts()), {
    url: "https://10.9.9.9:8443",
    tls: { cert: "CLIENT CERT", key: "CLIENT KEY" },
  });
});

Deno.test("resolveRemote refuses an unknown remote and says how to add it", () => {
  assert.throws(
    () => resolveRemote("nope", opts()),
    refused(
      "invalid",
      /unknown Incus remote "nope": it is not in .*config\.yml \(known: local, other-sock, lab, noport, weird, team\); add it with `incus remote add nope https:\/\/HOST:8443`/,
    ),
  );
  assert.throws(
    () => resolveRemote("nope", opts({})),
    refused(
      "invalid",
      /unknown Incus remote "nope": there is no \/home\/u\/\.config\/incus\/config\.yml/,
    ),
  );
});

Deno.test("resolveRemote refuses a missing client certificate or key and names the command that makes one", () => {
  for (const gone of ["client.crt", "client.key"]) {
    const files = { ...FILES };
    delete files[`${CONF}/${gone}`];
    assert.throws(
      () => resolveRemote("lab", opts(files)),
      refused(
        "invalid",
        new RegExp(
          `Incus remote "lab": no client certificate: ${CONF}/${gone} is missing; create one with \`incus remote generate-certificate\``,
        ),
      ),
    );
  }
});

Deno.test("resolveRemote refuses an image server, a bad address and a bad URL", () => {
  assert.throws(
    () => resolveRemote("images", opts()),
    refused("invalid", /image server \(protocol simplestreams\)/),
  );
  assert.throws(
    () => resolveRemote("weird", opts()),
    refused("invalid", /address isx cannot use: "tcp:\/\/x"/),
  );
  assert.throws(() => normalizeUrl("https://"), refused("invalid", /is not a URL/));
});

Deno.test("parseRemotes refuses malformed YAML and a remotes: that is not a map", () => {
  assert.throws(
    () => parseRemotes("remotes: [", "/c.yml"),
    refused("parse", /read Incus client config \/c\.yml/),
  );
  assert.throws(
    () => parseRemotes("remotes: [1]", "/c.yml"),
    refused("parse", /"remotes" is not a map/),
  );
  assert.deepEqual(parseRemotes("", "/c.yml"), {});
});

function info(over: Partial<ServerInfo> & { clustered?: boolean } = {}): ServerInfo {
  return {
    api_extensions: [],
    api_version: "1.0",
    auth: over.auth ?? "trusted",
    environment: {
      driver: "lxc",
      server_version: "6.0",
      server_clustered: over.clustered ?? false,
    },
    config: {},
  };
}
const probe = (r: ServerInfo | Error) => ({
  where: "https://10.0.0.5:8443",
  serverInfo: () => r instanceof Error ? Promise.reject(r) : Promise.resolve(r),
});

Deno.test("checkRemote refuses an untrusted client with the trust commands to run", async () => {
  await assert.rejects(
    checkRemote(probe(info({ auth: "untrusted" })), { remote: "lab" }),
    refused(
      "forbidden",
      /does not trust this client's certificate: on the server run `incus config trust add-certificate <client\.crt>`.*`incus remote add lab https:\/\/10\.0\.0\.5:8443 --token TOKEN`/,
    ),
  );
});

Deno.test("checkRemote explains a server certificate the client does not trust", async () => {
  const tls = new IsbError(
    "connect",
    "cannot connect to incusd at https://10.0.0.5:8443: invalid peer certificate: UnknownIssuer",
  );
  await assert.rejects(
    checkRemote(probe(tls), { remote: "lab" }),
    refused(
      "connect",
      /UnknownIssuer; the server's certificate is not the one the incus client trusts for "lab": run `incus remote add lab https:\/\/10\.0\.0\.5:8443`/,
    ),
  );
  const other = new IsbError("connect", "cannot connect to incusd at x: refused");
  await assert.rejects(checkRemote(probe(other), { remote: "lab" }), (e) => e === other);
});

Deno.test("checkRemote refuses --target outside a cluster and accepts it in one", async () => {
  await assert.rejects(
    checkRemote(probe(info()), { target: "m1" }),
    refused("invalid", /--target m1: incusd at https:\/\/10\.0\.0\.5:8443 is not a cluster member/),
  );
  assert.equal(
    (await checkRemote(probe(info({ clustered: true })), { target: "m1" })).auth,
    "trusted",
  );
});
