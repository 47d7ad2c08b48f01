import assert from "node:assert/strict";
import { IsbError } from "../../rpc/base.ts";
import { DEFAULT_PORTS, nftTables, parseProxyConfig, PROXY_ONLY_BRIDGE } from "./host_config.ts";

const DEFAULTS = {
  bridge: "incusbr0",
  proxy_only_bridge: PROXY_ONLY_BRIDGE,
  proxy_only_subnets: "10.78.0.0/16",
  ports: { ...DEFAULT_PORTS },
  dns: true,
  nft_prefix: "isx",
  domains: [],
  limits: {
    connections_per_instance: 256,
    header_timeout: 30_000,
    keepalive_timeout: 120_000,
    stream_idle_timeout: 900_000,
  },
};

Deno.test("parseProxyConfig gives the defaults for a missing, empty, comments-only or other-blocks file", () => {
  for (const text of ["", "# only\n", "templates:\n  searchPaths: []\n", "proxy: {}\n"]) {
    assert.deepEqual(parseProxyConfig(text), DEFAULTS, JSON.stringify(text));
  }
});

Deno.test("parseProxyConfig reads every field of the proxy block", () => {
  const got = parseProxyConfig(`
proxy:
  bridge: br1
  proxy_only_bridge: isxp1
  proxy_only_subnets: 10.90.0.0/16
  gateway: 10.77.0.1
  ports: { tls: 8443, forward: 0 }
  dns: false
  nft_prefix: isxtest_ab12
  domains: [registry.npmjs.org]
  hosts: { anthropic: [api.anthropic.com] }
  limits: { connections_per_instance: 9, header_timeout: 5s, keepalive_timeout: 90,
            stream_idle_timeout: 2m }
`);
  assert.deepEqual(got, {
    bridge: "br1",
    proxy_only_bridge: "isxp1",
    proxy_only_subnets: "10.90.0.0/16",
    gateway: "10.77.0.1",
    ports: { tls: 8443, forward: 0, health: DEFAULT_PORTS.health },
    dns: false,
    nft_prefix: "isxtest_ab12",
    domains: ["registry.npmjs.org"],
    hosts: { anthropic: ["api.anthropic.com"] },
    limits: {
      connections_per_instance: 9,
      header_timeout: 5_000,
      keepalive_timeout: 90_000,
      stream_idle_timeout: 120_000,
    },
  });
});

Deno.test("parseProxyConfig refuses a wrong field by name, and broken YAML by line", () => {
  const CASES: [string, string, string][] = [
    ["proxy: { brige: x }", "invalid", "read config: proxy.brige: unknown field"],
    ["proxy: { bridge: '' }", "invalid", "read config: proxy.bridge: expected"],
    [
      "proxy: { ports: { tls: 70000 } }",
      "invalid",
      "proxy.ports.tls: expected an integer from 0 to 65535",
    ],
    ["proxy: { ports: { ssh: 22 } }", "invalid", "proxy.ports.ssh: unknown field"],
    [
      "proxy: { proxy_only_bridge: a-name-far-too-long }",
      "invalid",
      "proxy.proxy_only_bridge: expected a network name",
    ],
    [
      "proxy: { proxy_only_subnets: 10.0.0.0/8 }",
      "invalid",
      "proxy.proxy_only_subnets: expected a /16",
    ],
    ["proxy: { dns: yes }", "invalid", "proxy.dns: expected true or false"],
    [
      "proxy: { nft_prefix: 'isx; flush ruleset' }",
      "invalid",
      "proxy.nft_prefix: expected a lowercase name",
    ],
    ["proxy: { domains: x.y }", "invalid", "proxy.domains: expected a list"],
    ["proxy: { hosts: { gitlab: [x] } }", "invalid", "proxy.hosts.gitlab: unknown field"],
    [
      "proxy: { limits: { header_timeout: soon } }",
      "invalid",
      'proxy.limits.header_timeout: "soon" is not a duration',
    ],
    [
      "proxy: { limits: { connections_per_instance: 0 } }",
      "invalid",
      "connections_per_instance: expected an integer from 1",
    ],
    ["proxy: { ports: null }", "invalid", "proxy.ports: expected a mapping"],
    ["proxy: [1]", "invalid", "proxy: expected a mapping"],
    ["proxy:\n  bridge: a\n bad: 1", "parse", "read config: line 3: "],
  ];
  for (const [text, code, msg] of CASES) {
    assert.throws(() => parseProxyConfig(text), (e: unknown) => {
      assert.ok(e instanceof IsbError && e.code === code, `${text}: ${e}`);
      assert.ok(e.message.includes(msg), `${e.message} lacks ${msg}`);
      return true;
    }, text);
  }
});

Deno.test("nftTables: the plain names on incusbr0, the bridge's name on any other (no clash)", () => {
  assert.deepEqual(nftTables("incusbr0"), { guard: "isx_guard", connLimit: "isx_connlimit" });
  assert.deepEqual(nftTables("isxtest1a2b3c"), {
    guard: "isx_guard_isxtest1a2b3c",
    connLimit: "isx_connlimit_isxtest1a2b3c",
  });
  assert.deepEqual(nftTables("My-Br.0"), {
    guard: "isx_guard_my_br_0",
    connLimit: "isx_connlimit_my_br_0",
  });
  assert.deepEqual(nftTables("isxtest1a2b3c", "ihost_0e035b"), {
    guard: "ihost_0e035b_guard",
    connLimit: "ihost_0e035b_connlimit",
  });
  for (const t of Object.values(nftTables("a-very-long-nam"))) {
    assert.match(t, /^[a-z][a-z0-9_]{0,30}$/);
  }
});
