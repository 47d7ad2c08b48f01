/**
 * The agents lab's proxy (agents_lab.ts): the real proxy, in the test process, on the
 * bridge's gateway, holding the "real" keys for two test-only names and sending their
 * traffic to the lab's model mocks on loopback. Apart from the lab because it is the host
 * half (policy, client registry, listeners) where the lab is the guest half (instance, DNS,
 * agent configuration, runs). Its forward proxy resolves no name: a guest pointed at it is
 * counted and refused, and nothing leaves the host. On failure it closes what it started.
 *
 * @module
 */

import type { IncusClient } from "../../rpc/mod.ts";
import { ClientRegistry, incusSource } from "../../proxy/callers/clients.ts";
import { parseCredentials } from "../../proxy/config/credentials.ts";
import type { CaSigner } from "../../proxy/tls/ca.ts";
import { Policy, startProxy } from "../../proxy/mod.ts";

/** The two providers the lab serves. */
type Pair = { anthropic: string; openai: string };

/** A started lab proxy; the lab closes both. */
export interface LabProxy {
  /** The proxy (TLS and forward on the gateway, health on loopback). */
  proxy: Awaited<ReturnType<typeof startProxy>>;
  /** Who each instance is, read from Incus. */
  registry: ClientRegistry;
}

/** Starts the registry and the proxy for `domains`, relaying to `upstreams`. */
export async function startLabProxy(o: {
  incus: IncusClient;
  gateway: string;
  ca: CaSigner;
  keys: Pair;
  domains: Pair;
  upstreams: Pair;
}): Promise<LabProxy> {
  const policy = new Policy(
    parseCredentials(
      `anthropic: { accounts: { main: { api_key: ${o.keys.anthropic} } } }\n` +
        `openai: { accounts: { main: { api_key: ${o.keys.openai} } } }\n`,
    ),
    { hosts: { anthropic: [o.domains.anthropic], openai: [o.domains.openai] } },
  );
  const registry = new ClientRegistry(incusSource(o.incus), {
    now: Date.now,
    minRefreshMs: 200,
  });
  await registry.start();
  try {
    const proxy = await startProxy({
      listen: {
        tls: { hostname: o.gateway, port: 0 },
        forward: { hostname: o.gateway, port: 0 },
        health: [{ hostname: "127.0.0.1", port: 0 }],
      },
      policy,
      ca: o.ca,
      clients: registry,
      upstreamOverrides: {
        [o.domains.anthropic]: o.upstreams.anthropic,
        [o.domains.openai]: o.upstreams.openai,
      },
      allowLoopbackTargets: true,
      // the forward proxy looks up no name (counted, then refused): nothing leaves the host
      resolve: (host) => Promise.reject(new Error(`the lab proxy resolves no name (${host})`)),
    });
    return { proxy, registry };
  } catch (e) {
    await registry.close();
    throw e;
  }
}
