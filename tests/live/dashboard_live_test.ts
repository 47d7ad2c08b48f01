/**
 * The dashboard in a real browser (Debian's Chromium, headless, over the DevTools protocol:
 * tests/helpers/cdp.ts) against a real proxy on a bridge this test makes, with a real
 * container: the page opened with the token shows, each within 2 s of it happening, an
 * instance created after the page loaded, that instance's token counters after a model call
 * it makes through the proxy (to a mock model on loopback), the forward-proxy target it was
 * refused, and a finished task's exit code (reported to `POST /tasks` by isx mcp's reporter,
 * cli/mcp_backend.ts). Without the token the page is 401, with a foreign `Host` 421, and
 * from inside the instance it cannot be reached at all (404 on the gateway's ops port, the
 * one answer for a refused target through the forward proxy). Screenshots at 1280x800 and a
 * phone's width go to tests/live/output/.
 */

import { equal, ok } from "node:assert/strict";
import { LIVE_SOCKET, NO_INCUS, removeInstance, testName } from "../helpers/live.ts";
import { createIncusClient, type IncusClient, IsbError } from "../../rpc/mod.ts";
import {
  ClientRegistry,
  dashboardToken,
  incusSource,
  InstanceShelf,
  loadCa,
  Policy,
  startProxy,
  taskReportToken,
} from "../../proxy/mod.ts";
import { parseCredentials } from "../../proxy/config/credentials.ts";
import { bridgeGateway } from "../../proxy/host/dns.ts";
import { startMockAnthropic } from "../fakes/mock_anthropic.ts";
import { Browser, haveChromium } from "../helpers/cdp.ts";
import { launchPinned, TRUSTED_STAMPS } from "./_pinned.ts";
import { taskReporter } from "../../cli/mcp_backend.ts";

const OUT = new URL("./output/", import.meta.url).pathname;
const dec = new TextDecoder();
const enc = new TextEncoder();

async function sh(incus: IncusClient, name: string, script: string) {
  let r;
  try {
    r = await incus.execCapture(name, ["bash", "-c", script], { timeoutMs: 60_000 });
  } catch (e) {
    if (!(e instanceof IsbError && e.code === "websocket")) throw e;
    r = await incus.execCapture(name, ["bash", "-c", script], { timeoutMs: 60_000 });
  }
  return { code: r.exitCode, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

/** One raw HTTP/1.1 exchange from the host, with exactly this Host header. */
async function rawStatus(port: number, path: string, host: string): Promise<number> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(
      enc.encode(`GET ${path} HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`),
    );
    const buf = new Uint8Array(4096);
    const n = await conn.read(buf);
    return Number(dec.decode(buf.subarray(0, n ?? 0)).split(" ", 2)[1]);
  } finally {
    conn.close();
  }
}

const q = (s: string) => JSON.stringify(s);
/** How long each change took to show (ms), written next to the screenshots. */
const timings: Record<string, number> = {};

Deno.test({
  name:
    "dashboard in Chromium: a new instance, its tokens, its refused target and a finished task show within 2 s; nothing of it reaches the instance",
  ignore: NO_INCUS || !haveChromium(),
  async fn(t) {
    const incus = createIncusClient({ socket: LIVE_SOCKET });
    const id = crypto.randomUUID().slice(0, 6);
    const bridge = `idash${id.slice(0, 4)}`;
    const name = testName("idash");
    const domain = `api-${id}.anthropic.isx-test`;
    const dir = await Deno.makeTempDir({ prefix: "isx-dash-" });
    const mock = startMockAnthropic();
    let bridgeMade = false;
    let created = false;
    let registry: ClientRegistry | undefined;
    let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
    let browser: Browser | undefined;
    try {
      // a /24 no bridge and no host route has (Incus's "auto" gives up on a busy host)
      const used = new Set([
        ...(await incus.call("GET", "/1.0/networks", { query: { recursion: 1 } }).then((r) =>
          r.kind === "sync" ? r.metadata as { config?: Record<string, string> }[] : []
        )).map((n) => n.config?.["ipv4.address"]?.split(".").slice(0, 3).join(".")),
        ...Deno.networkInterfaces().map((i) => i.address.split(".").slice(0, 3).join(".")),
      ]);
      let subnet = "";
      while (!subnet || used.has(subnet)) {
        subnet = `10.${150 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}`;
      }
      await incus.createNetwork({
        name: bridge,
        type: "bridge",
        config: { "ipv4.address": `${subnet}.1/24`, "ipv4.nat": "false", "ipv6.address": "none" },
      }, { step: `create bridge ${bridge}` });
      bridgeMade = true;
      const gw = (await bridgeGateway(incus, bridge))!;
      ok(gw, "the test bridge has an IPv4 gateway");
      const shelf = new InstanceShelf();
      registry = new ClientRegistry(incusSource(incus, (l) => shelf.set(l)), {
        now: Date.now,
        minRefreshMs: 200,
      });
      await registry.start();
      const shutdownToken = crypto.randomUUID() + crypto.randomUUID();
      const token = await dashboardToken(shutdownToken);
      const report = await taskReportToken(shutdownToken);
      proxy = await startProxy({
        listen: {
          tls: { hostname: gw, port: 0 },
          forward: { hostname: gw, port: 0 },
          health: [{ hostname: gw, port: 0 }, { hostname: "127.0.0.1", port: 0 }],
        },
        policy: new Policy(
          parseCredentials(`anthropic: { accounts: { main: { api_key: sk-ant-real-${id} } } }`),
          { hosts: { anthropic: [domain] } },
        ),
        ca: await loadCa(`${dir}/ca`),
        clients: registry,
        upstreamOverrides: { [domain]: mock.origin },
        dashboard: { token, reportToken: report, shelf },
      });
      const [opsGw, opsLo] = proxy.addrs.health.map((a) => a.port) as [number, number];
      const base = `http://127.0.0.1:${opsLo}`;

      await t.step("without the token 401, with a foreign Host 421", async () => {
        const res = await fetch(`${base}/dashboard/`);
        equal(res.status, 401);
        await res.body?.cancel();
        const ev = await fetch(`${base}/dashboard/events`);
        equal(ev.status, 401);
        await ev.body?.cancel();
        equal(await rawStatus(opsLo, `/dashboard?token=${token}`, `rebound.example:${opsLo}`), 421);
        equal(await rawStatus(opsLo, `/dashboard?token=${token}`, `localhost:${opsLo}`), 303);
      });

      browser = await Browser.launch();
      const page = await browser.newPage(1280, 800);
      await page.goto(`${base}/dashboard?token=${token}`);
      ok(!(await page.eval<string>("location.href")).includes("token="), "token left the URL");
      await page.waitFor(`document.getElementById("live").textContent === "live"`, 5000);

      await t.step("an instance created after the page loaded shows within 2 s", async () => {
        created = true;
        // the row's first appearance, timed on the host clock Incus also stamps created_at with
        const row = `document.querySelector('tr[data-instance="${name}"]')`;
        const appeared = page.waitFor(row, 180_000).then(() => Date.now());
        await launchPinned(incus, name, {
          stamps: {
            ...TRUSTED_STAMPS,
            "user.incus-spawn.profile": "tpl-dash",
            "user.incus-spawn.network": "full",
          },
          image: "dev-base",
          bridge,
        });
        const ms = await page.waitFor(
          `document.querySelector('tr[data-instance="${name}"] td[data-field=status]')?.textContent === "Running"`,
          2000,
        );
        timings.running_after_launch_returned = ms;
        const createdAt = Date.parse((await incus.getInstance(name)).value.created_at);
        const lag = (await appeared) - createdAt;
        timings.row_after_created_at = lag;
        ok(lag <= 2000, `the row appeared ${lag} ms after Incus created the instance`);
      });

      await t.step(
        "its token counters rise within 2 s of a model call through the proxy",
        async () => {
          const tls = proxy!.addrs.tls.port;
          const r = await sh(
            incus,
            name,
            `curl -sSk --resolve ${domain}:${tls}:${gw} -H 'x-api-key: sk-ant-placeholder' ` +
              `-H 'content-type: application/json' -d '{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}' ` +
              `https://${domain}:${tls}/v1/messages`,
          );
          equal(r.code, 0, r.err);
          ok(r.out.includes('"input_tokens":1200'), r.out);
          timings.tokens_after_call = await page.waitFor(
            `document.querySelector('[data-card="${name}"] [data-field=input_tokens]')?.textContent === "1200"`,
            2000,
          );
          equal(
            await page.eval(
              `document.querySelector('[data-card="${name}"] [data-field=output_tokens]').textContent`,
            ),
            "34",
          );
        },
      );

      await t.step("a refused forward-proxy target shows within 2 s, with its fix", async () => {
        const fwd = proxy!.addrs.forward.port;
        const target = `${gw}:${opsGw}`;
        const r = await sh(
          incus,
          name,
          `curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x http://${gw}:${fwd} 'http://${target}/dashboard?token=${token}'`,
        );
        equal(r.out, "502", "the gateway is the host: refused like an unreachable target");
        timings.refusal_after_curl = await page.waitFor(
          `document.querySelector('li[data-kind="forward_target"][data-target=${
            q(target)
          }]')?.textContent.includes("network: full")`,
          2000,
        );
      });

      await t.step("a finished task's exit code shows within 2 s of isx mcp's report", async () => {
        await Deno.mkdir(`${dir}/state/proxy`, { recursive: true });
        await Deno.writeTextFile(`${dir}/state/proxy/task-report.token`, report + "\n");
        const send = taskReporter(
          `${dir}/state`,
          () => Promise.resolve({ ports: { health: opsLo } }),
        );
        const fact = {
          task_id: "t1-dash",
          instance: name,
          kind: "command" as const,
          run: 1,
          session: "1-2",
          client: "dashboard-test",
        };
        send({ ...fact, state: "running" });
        await page.waitFor(
          `document.querySelector('tr[data-task="t1-dash"] td[data-field=state]')?.textContent === "running"`,
          2000,
        );
        // the exit code of a real command in the instance
        const run = await sh(incus, name, "exit 7");
        send({ ...fact, state: "finished", exit_code: run.code });
        timings.exit_code_after_report = await page.waitFor(
          `document.querySelector('tr[data-task="t1-dash"] td[data-field=exit_code]')?.textContent === "7"`,
          2000,
        );
      });

      await Deno.mkdir(OUT, { recursive: true });
      await Deno.writeTextFile(`${OUT}timings.json`, JSON.stringify(timings, null, 2) + "\n");
      await page.screenshot(`${OUT}dashboard_1280x800.png`);
      await page.screenshot(`${OUT}dashboard_full.png`, { full: true });
      await page.viewport(390, 844, true);
      await page.waitFor("true", 100);
      await new Promise((r) => setTimeout(r, 400)); // the charts' resize debounce
      await page.screenshot(`${OUT}dashboard_390.png`);

      await t.step("from inside the instance the dashboard cannot be reached", async () => {
        const direct = await sh(
          incus,
          name,
          `curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H 'host: 127.0.0.1:${opsGw}' 'http://${gw}:${opsGw}/dashboard?token=${token}'; echo; ` +
            `curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H 'host: 127.0.0.1:${opsGw}' -H 'cookie: isx_dashboard_${opsGw}=${token}' 'http://${gw}:${opsGw}/dashboard/view.json'; echo; ` +
            `curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST -H 'x-isx-task-token: ${report}' -d '{}' 'http://${gw}:${opsGw}/tasks'`,
        );
        equal(direct.out, "404\n404\n404", "the ops port answers instances nothing, token or not");
        const via = await sh(
          incus,
          name,
          `curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x http://${gw}:${
            proxy!.addrs.forward.port
          } 'http://127.0.0.1:${opsLo}/dashboard?token=${token}'`,
        );
        equal(via.out, "502", "nor through the forward proxy to the host's loopback");
      });
    } finally {
      await browser?.close();
      if (created) await removeInstance(incus, name);
      await proxy?.close();
      await registry?.close();
      await mock.close();
      if (bridgeMade) {
        await incus.deleteNetwork(bridge, { step: `delete bridge ${bridge}` }).catch((e) =>
          // deno-lint-ignore no-console
          console.error(`cleanup: bridge ${bridge}: ${(e as Error).message}`)
        );
      }
      incus.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
