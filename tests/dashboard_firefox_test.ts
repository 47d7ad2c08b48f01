/**
 * The dashboard in Firefox (Debian's firefox-esr, headless, over WebDriver BiDi:
 * tests/helpers/bidi.ts) against a real proxy's ops port on loopback (in process, no Incus):
 * the page opened with the token trades it for a cookie, the event stream's first view
 * renders (health badge, the `live` badge, one instance row and one token card per isx
 * instance, a warm-pool member's `pool (ready)` chip laid out and styled), a later listing
 * (the member claimed) shows without a reload, and the viewport's screenshot is a 1280x800 PNG
 * that differs from the same browser's blank page. The Chromium test is
 * tests/live/dashboard_live_test.ts; the screenshot goes to tests/live/output/.
 */

import { equal, notDeepStrictEqual, ok } from "node:assert/strict";
import { loadCa } from "../proxy/tls/ca.ts";
import { emptyCredentials } from "../proxy/config/credentials.ts";
import { InstanceShelf, Policy, startProxy } from "../proxy/mod.ts";
import type { Instance } from "../rpc/mod.ts";
import { PortCallers } from "./fakes/guest_client.ts";
import { loopbackListen } from "./helpers/proxy.ts";
import { Firefox, haveFirefox } from "./helpers/bidi.ts";

const OUT = new URL("./live/output/", import.meta.url).pathname;
const TOKEN = "f".repeat(64);
const q = (s: string) => JSON.stringify(s);

function listed(name: string, stamps: Record<string, string>): Instance {
  const config: Record<string, string> = {};
  for (const [k, v] of Object.entries(stamps)) config[`user.incus-spawn.${k}`] = v;
  return {
    name,
    type: "container",
    status: "Running",
    config,
    devices: { eth0: { type: "nic", network: "b0", "ipv4.address": "10.9.8.7" } },
    created_at: "2026-12-01T10:00:00Z",
    project: "default",
  } as unknown as Instance;
}

/** Width and height from a PNG's IHDR chunk. */
function pngSize(png: Uint8Array): [number, number] {
  equal([...png.subarray(1, 4)].map((c) => String.fromCharCode(c)).join(""), "PNG");
  const v = new DataView(png.buffer, png.byteOffset);
  return [v.getUint32(16), v.getUint32(20)];
}

const worker = listed("ff-worker", { type: "instance", profile: "tpl-minimal", network: "full" });
const member = (stamps: Record<string, string>) =>
  listed("pool-minimal-ff", { type: "instance", profile: "tpl-minimal", ...stamps });

Deno.test({
  name:
    "dashboard in Firefox: the streamed view renders (rows, cards, a pool member's chip) and a later listing shows without a reload",
  ignore: !haveFirefox(),
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "isx-dash-ff-" });
    const shelf = new InstanceShelf();
    shelf.set([worker, member({ "mcp-pool": "ready" }), listed("tpl-x", { type: "base" })]);
    const proxy = await startProxy({
      listen: loopbackListen(),
      policy: new Policy(emptyCredentials()),
      ca: await loadCa(`${dir}/ca`),
      clients: new PortCallers(),
      dashboard: { token: TOKEN, reportToken: "e".repeat(64), shelf },
      hostNets: () => ({ own: new Set(), subnets: [] }),
    });
    let ff: Firefox | undefined;
    try {
      const port = proxy.addrs.health[0]!.port;
      ff = await Firefox.launch(1280, 800);
      const blank = await ff.screenshot();
      await ff.goto(`http://127.0.0.1:${port}/dashboard?token=${TOKEN}`);
      equal(await ff.eval("location.pathname"), "/dashboard/", "the token left the address bar");
      await ff.waitFor(`document.getElementById("live").textContent === "live"`, 15_000);
      equal(await ff.eval(`document.getElementById("health").textContent`), "proxy running");
      equal(await ff.eval("typeof uPlot"), "function", "the embedded uPlot loaded");
      const rows =
        `[...document.querySelectorAll("#instances tbody tr")].map((r) => r.dataset.instance)`;
      equal(
        JSON.stringify(await ff.eval(rows)),
        JSON.stringify(["ff-worker", "pool-minimal-ff"]),
        "isx instances only",
      );
      equal(
        await ff.eval(`document.querySelectorAll("[data-card]").length`),
        2,
        "a token card per instance",
      );
      const chip = `document.querySelector(${
        q('tr[data-instance="pool-minimal-ff"] [data-field="pool"]')
      })`;
      equal(await ff.eval(`${chip}?.textContent`), "pool (ready)");
      const box = await ff.eval<{ w: number; h: number; top: number; bg: string }>(
        `(() => { const r = ${chip}.getBoundingClientRect();
          return { w: r.width, h: r.height, top: r.top, bg: getComputedStyle(${chip}).backgroundColor }; })()`,
      );
      ok(box.w > 20 && box.h > 5 && box.top > 0 && box.top < 800, JSON.stringify(box));
      equal(box.bg, "rgb(47, 111, 219)", "the page's stylesheet applies");
      equal(
        await ff.eval(
          `document.querySelector(${q('tr[data-instance="ff-worker"] [data-field="pool"]')})`,
        ),
        null,
        "an ordinary instance has no pool chip",
      );
      await Deno.mkdir(OUT, { recursive: true });
      const png = await ff.screenshot(`${OUT}dashboard_firefox_1280x800.png`);
      // the member is claimed: the next listing reaches the open page over the stream
      shelf.set([
        worker,
        member({ "mcp-pool": "", "mcp-session": "s-ff", "mcp-client": "claude-code" }),
      ]);
      await ff.waitFor(`${chip} === null`, 10_000);
      ok(
        String(
          await ff.eval(
            `document.querySelector(${q('tr[data-instance="pool-minimal-ff"]')}).textContent`,
          ),
        ).includes("claude-code"),
        "the claimed member shows its holder",
      );
      deepStrictSize(png, blank);
    } finally {
      await ff?.close();
      await proxy.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

function deepStrictSize(png: Uint8Array, blank: Uint8Array) {
  equal(JSON.stringify(pngSize(png)), JSON.stringify([1280, 800]));
  equal(JSON.stringify(pngSize(blank)), JSON.stringify([1280, 800]));
  notDeepStrictEqual(png, blank, "the rendered page is not the blank page's pixels");
  ok(png.length > blank.length * 4, `${png.length} bytes against a blank ${blank.length}`);
}
