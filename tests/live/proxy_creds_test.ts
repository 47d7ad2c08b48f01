/**
 * Credentials that change while the proxy runs (issue 23), with a real container as the
 * caller: the proxy (in this process, on random ports) reads its own isx home in a temp
 * dir and reloads it live exactly as `isx proxy` does (watchCredentials); the container is
 * on a bridge of its own (made and removed here, no NAT) and reaches the proxy on that
 * bridge's gateway with `curl --resolve`, so no DNS block, no user bridge and no user proxy
 * is touched. The upstream is the loopback fake.
 *
 * Steps: a 20 s SSE stream in flight while the key changes finishes with the old key, the
 * next request carries the new one, pid and counting_since unchanged; a broken or 0644 file
 * keeps the old key, fixing it applies the new one; a command source with ttl 2s under 50
 * concurrent requests runs once per ttl; a 401 makes exactly one refresh and the guests get
 * the retried answer; a second 401 within the ttl runs nothing; a failing command keeps the
 * last value and `/health` says so.
 */

import { equal, ok } from "node:assert/strict";
import { LIVE_SOCKET, NO_INCUS, removeInstance } from "../helpers/live.ts";
import { createIncusClient, type IncusClient, IsbError } from "../../rpc/mod.ts";
import { loadCa } from "../../proxy/tls/ca.ts";
import { ClientRegistry, incusSource } from "../../proxy/callers/clients.ts";
import {
  CommandSources,
  type LiveReload,
  loadCredentials,
  loadProxyConfig,
  parseActivity,
  Policy,
  type ProxyConfig,
  startProxy,
  watchCredentials,
} from "../../proxy/mod.ts";
import { startFakeUpstream } from "../fakes/upstream.ts";
import { launchPinned, TRUSTED_STAMPS, until } from "./_pinned.ts";
import { credentialLines } from "../../cli/proxy_status.ts";

const OLD = "sk-ant-api03-CREDS-OLD-KEY-0123456789abcdef";
const NEW = "sk-ant-api03-CREDS-NEW-KEY-0123456789abcdef";
const THIRD = "sk-ant-api03-CREDS-THIRD-KEY-0123456789abc";
const PLACEHOLDER = "sk-ant-placeholder";
const dec = new TextDecoder();

async function sh(incus: IncusClient, name: string, script: string, timeoutMs = 120_000) {
  let r;
  try {
    r = await incus.execCapture(name, ["sh", "-c", script], { timeoutMs });
  } catch (e) {
    if (!(e instanceof IsbError && e.code === "websocket")) throw e;
    r = await incus.execCapture(name, ["sh", "-c", script], { timeoutMs });
  }
  return { code: r.exitCode, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

/** A free 10.231.N.0/24 for the test bridge (none of the host's networks uses it). */
async function freeSubnet(incus: IncusClient): Promise<string> {
  const used = new Set<string>();
  for (const n of await incus.listNetworks()) {
    const a = n.config?.["ipv4.address"];
    if (a) used.add(a.split(".").slice(0, 3).join("."));
  }
  for (let i = 0; i < 50; i++) {
    const p = `10.231.${1 + Math.floor(Math.random() * 253)}`;
    if (!used.has(p)) return p;
  }
  throw new TypeError("no free 10.231.N.0/24");
}

/** Deletes the test bridge, retrying while a busy incusd trips over other tests' veths. */
async function deleteBridge(incus: IncusClient, bridge: string): Promise<void> {
  for (let attempt = 1;; attempt++) {
    try {
      return await incus.deleteNetwork(bridge, { step: `delete network ${bridge}` });
    } catch (e) {
      if (e instanceof IsbError && e.code === "not_found") return;
      if (attempt === 10) {
        // deno-lint-ignore no-console
        return console.error(`cleanup: network ${bridge}: ${(e as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

Deno.test({
  name: "proxy applies changed and command-sourced credentials live to a real container's calls",
  ignore: NO_INCUS,
  async fn(t) {
    const incus = createIncusClient({ socket: LIVE_SOCKET });
    const id = crypto.randomUUID().slice(0, 6);
    const bridge = `icreds${id}`;
    const guest = `i-creds-${id}`;
    const domain = `api-${id}.anthropic.isx-test`;
    const home = await Deno.makeTempDir({ prefix: "i-creds-home-" });
    const credsPath = `${home}/credentials.yaml`;
    const configPath = `${home}/config.yaml`;
    const up = startFakeUpstream();
    let registry: ClientRegistry | undefined;
    let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
    let reload: LiveReload | undefined;
    let bridgeMade = false;
    let launched = false;
    /** Writes the file as an editor does: a new file renamed over the old. */
    const writeCreds = async (text: string, mode = 0o600) => {
      const tmp = `${credsPath}.tmp`;
      await Deno.writeTextFile(tmp, text, { mode: 0o600 });
      await Deno.chmod(tmp, mode);
      await Deno.rename(tmp, credsPath);
    };
    const key = (k: string) => `anthropic: { accounts: { main: { api_key: ${k} } } }\n`;
    try {
      await writeCreds(key(OLD));
      await Deno.writeTextFile(configPath, `proxy:\n  hosts: { anthropic: [${domain}] }\n`);
      const prefix = await freeSubnet(incus);
      bridgeMade = true; // from here on, cleanup removes it (a failed create leaves none)
      for (let attempt = 1;; attempt++) {
        try {
          await incus.createNetwork({
            name: bridge,
            type: "bridge",
            description: "i-creds live test (proxy_creds_test.ts)",
            config: {
              "ipv4.address": `${prefix}.1/24`,
              "ipv4.nat": "false",
              "ipv6.address": "none",
            },
          }, { step: `create network ${bridge}` });
          break;
        } catch (e) {
          // a busy incusd (other tests' veths coming and going) fails a create now and then
          if (attempt === 3 || !(e instanceof IsbError && e.code === "api")) throw e;
          await new Promise((r) => setTimeout(r, 2000));
        }
      }
      const gateway = `${prefix}.1`;

      const ca = await loadCa(`${home}/ca`);
      const policyConfig = (c: ProxyConfig) => ({
        domains: c.domains,
        ...(c.hosts ? { hosts: c.hosts } : {}),
      });
      const policy = new Policy(
        await loadCredentials(credsPath),
        policyConfig(await loadProxyConfig(configPath)),
      );
      const sources = new CommandSources();
      registry = new ClientRegistry(incusSource(incus), { now: Date.now, minRefreshMs: 200 });
      await registry.start();
      reload = await watchCredentials({
        credentialsPath: credsPath,
        configPath,
        policy,
        sources,
        policyConfig,
      });
      proxy = await startProxy({
        listen: {
          tls: { hostname: gateway, port: 0 },
          forward: { hostname: gateway, port: 0 },
          health: [{ hostname: "127.0.0.1", port: 0 }],
        },
        policy,
        ca,
        clients: registry,
        sources,
        reload: () => reload!.state(),
        upstreamOverrides: { [domain]: up.origin },
      });
      const ops = `http://127.0.0.1:${proxy.addrs.health[0]!.port}`;
      const health = async () => await (await fetch(`${ops}/health`)).json();
      const activity = async () =>
        parseActivity(await (await fetch(`${ops}/activity`)).json()).instances[guest];
      const port = proxy.addrs.tls.port;
      const curl = (body: string, extra = "") =>
        `curl -sS --max-time 90 --cacert /tmp/isx-ca.pem --resolve ${domain}:${port}:${gateway} ` +
        `-H 'x-api-key: ${PLACEHOLDER}' -H 'content-type: application/json' ${extra} ` +
        `-d '${body}' https://${domain}:${port}/v1/messages`;
      /** One call from the guest: its status and what the upstream saw as the key. */
      const call = async () => {
        const before = up.requests.length;
        const r = await sh(incus, guest, curl("{}", "-o /tmp/out -w '%{http_code}'"));
        equal(r.code, 0, r.err);
        return {
          status: r.out,
          seen: up.requests.slice(before).map((q) => q.headers["x-api-key"]),
        };
      };
      const reloads = (n: number) =>
        until(
          `reload ${n}`,
          async () => {
            const h = await health();
            return h.credentials.reloads >= n ? h : undefined;
          },
          10_000,
          100,
        );

      launched = true;
      await launchPinned(incus, guest, {
        stamps: { ...TRUSTED_STAMPS },
        image: "dev-base",
        bridge,
      });
      await incus.pushFile(guest, "/tmp/isx-ca.pem", ca.certPem, {
        step: `push CA to ${guest}`,
        mode: 0o644,
      });
      await until("the proxy to know the guest", async () => {
        const r = await call().catch(() => undefined);
        return r?.status === "200" ? true : undefined;
      });

      await t.step(
        "a 20 s stream in flight keeps the old key; the next call carries the new one",
        async () => {
          const pid = (await health()).pid;
          const since = (await activity())!.counting_since;
          const started = up.requests.length;
          const stream = sh(
            incus,
            guest,
            curl('{"stream":true,"slow_ms":20000}', "-N"),
            120_000,
          );
          const inFlight = await until(
            "the stream to reach the upstream",
            () => up.requests.slice(started).find((q) => q.body.includes("slow_ms")),
            30_000,
            100,
          );
          equal(inFlight.headers["x-api-key"], OLD);
          await writeCreds(key(NEW));
          const t0 = Date.now();
          await reloads(1);
          // deno-lint-ignore no-console
          console.log(`reload applied ${Date.now() - t0} ms after the write`);
          up.quote = OLD; // an upstream quoting the rotated key back
          const next = await call();
          equal(next.status, "200");
          equal(next.seen.at(-1), NEW, "the next call carries the new key");
          const out = (await sh(incus, guest, "cat /tmp/out")).out;
          ok(!out.includes(OLD) && !out.includes(NEW), `no real key reaches the guest: ${out}`);
          ok(out.includes('"quote":"***'), out);
          up.quote = undefined;
          const s = await stream;
          equal(s.code, 0, s.err);
          ok(s.out.includes("message_stop"), "the stream ran to its end");
          ok(s.out.includes("key was ***") && !s.out.includes(OLD), s.out.slice(-300));
          equal((await health()).pid, pid, "no restart");
          const after = (await activity())!;
          equal(after.counting_since, since, "counting_since unchanged");
          equal(after.in_flight, 0);
        },
      );

      await t.step(
        "a broken file or a 0644 one keeps the old key; fixing it applies the new",
        async () => {
          await writeCreds("anthropic: { accounts: { main: { api_key: sk-ant-BROKEN } }\n");
          const broken = await until(
            "the error to show",
            async () => {
              const h = await health();
              return h.credentials.error ? h : undefined;
            },
            10_000,
            100,
          );
          ok(broken.credentials.error.includes("invalid YAML"), broken.credentials.error);
          ok(!JSON.stringify(broken).includes("sk-ant-"), "no value in /health");
          equal((await call()).seen.at(-1), NEW, "the key in force stays");
          await writeCreds(key(THIRD), 0o644);
          await until(
            "the mode error to show",
            async () => {
              const h = await health();
              return h.credentials.error?.includes("wider than 0600") ? h : undefined;
            },
            10_000,
            100,
          );
          equal((await call()).seen.at(-1), NEW);
          await Deno.chmod(credsPath, 0o600);
          const fixed = await reloads(2);
          equal(fixed.credentials.error, null);
          equal((await call()).seen.at(-1), THIRD);
        },
      );

      const counter = `${home}/runs`;
      const failFlag = `${home}/fail`;
      const script = `const f=${JSON.stringify(counter)};` +
        `try{Deno.statSync(${
          JSON.stringify(failFlag)
        });Deno.exit(3)}catch(e){if(!(e instanceof Deno.errors.NotFound))throw e}` +
        `let n=0;try{n=Number(Deno.readTextFileSync(f))}catch{};n++;Deno.writeTextFileSync(f,String(n));` +
        `console.log("sk-ant-api03-CMD-"+n)`;
      const runs = () => {
        try {
          return Number(Deno.readTextFileSync(counter));
        } catch {
          return 0;
        }
      };
      const commandCreds = (ttl: string) =>
        `anthropic:\n  accounts:\n    main:\n      api_key: { command: ${
          JSON.stringify([Deno.execPath(), "eval", script])
        }, ttl: ${ttl} }\n`;
      const burst = async () => {
        const before = up.requests.length;
        const loop = `for i in $(seq 50); do ${
          curl("{}", "-o /dev/null -w '%{http_code}\\n'")
        } & done; wait`;
        const r = await sh(incus, guest, loop, 180_000);
        const codes = r.out.trim().split("\n");
        return { codes, seen: up.requests.slice(before).map((q) => q.headers["x-api-key"]!) };
      };

      await t.step(
        "a command with ttl 2s under 50 concurrent calls runs once per ttl",
        async () => {
          await writeCreds(commandCreds("2s"));
          await reloads(3);
          const t0 = Date.now();
          const b = await burst();
          const elapsed = Date.now() - t0;
          equal(b.codes.length, 50);
          ok(b.codes.every((c) => c === "200"), b.codes.join(","));
          const n = runs();
          ok(n >= 1 && n <= 1 + Math.floor(elapsed / 2000), `${n} runs in ${elapsed} ms`);
          equal(new Set(b.seen).size, n, "each run's value served a share of the calls");
          const st = (await health()).credentials.sources[0];
          equal(st.state, "ok");
          equal(st.runs, n);
        },
      );

      await t.step(
        "a 401 makes exactly one refresh and the guests get the retried answer",
        async () => {
          await writeCreds(commandCreds("1h"));
          await reloads(4);
          equal((await call()).status, "200"); // the value in force, now kept for an hour
          const k = runs();
          up.validKeys = new Set([`sk-ant-api03-CMD-${k + 1}`]);
          const b = await burst();
          ok(b.codes.every((c) => c === "200"), b.codes.join(","));
          equal(runs(), k + 1, "exactly one refresh for 50 refused calls");
          ok(
            b.seen.includes(`sk-ant-api03-CMD-${k}`) &&
              b.seen.includes(`sk-ant-api03-CMD-${k + 1}`),
          );
          up.validKeys = new Set(["none-of-ours"]);
          equal((await call()).status, "401", "refused again: the guest gets the 401");
          equal(runs(), k + 1, "a second 401 within the ttl runs nothing");
          up.validKeys = undefined;
        },
      );

      await t.step("a failing command keeps the last value and /health says so", async () => {
        await writeCreds(commandCreds("2s"));
        await reloads(5);
        equal((await call()).status, "200"); // a fresh value, good for 2 s
        const last = `sk-ant-api03-CMD-${runs()}`;
        await Deno.writeTextFile(failFlag, "");
        await new Promise((r) => setTimeout(r, 2100)); // the value's ttl ends
        const r = await call();
        equal(r.status, "200");
        equal(r.seen.at(-1), last, "the last good value is kept");
        const st = (await health()).credentials.sources[0];
        equal(st.state, "failing");
        ok(st.failingSince > 0);
        ok(st.error.includes("exited with code 3"), st.error);
        const lines = credentialLines((await health()).credentials, Date.now());
        ok(lines.some((l) => l.includes("failing since")), lines.join("\n"));
        ok(!lines.join("\n").includes("sk-ant"), "status never shows a value");
      });
    } finally {
      await reload?.close();
      await proxy?.close();
      await registry?.close();
      await up.close();
      if (launched) await removeInstance(incus, guest);
      if (bridgeMade) await deleteBridge(incus, bridge);
      await Deno.remove(home, { recursive: true });
      incus.close();
    }
  },
});
