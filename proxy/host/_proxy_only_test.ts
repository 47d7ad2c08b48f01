import { deepStrictEqual as assertEquals, equal } from "node:assert/strict";
import { BridgeFollower, proxyOnlyGateway } from "./_proxy_only.ts";

Deno.test("proxyOnlyGateway answers only for a marked bridge with an address", () => {
  const marked = { "user.isx.role": "proxy-only", "ipv4.address": "10.78.254.1/24" };
  equal(proxyOnlyGateway(marked), "10.78.254.1");
  equal(proxyOnlyGateway({ "ipv4.address": "10.78.254.1/24" }), undefined);
  equal(proxyOnlyGateway({ ...marked, "ipv4.address": "auto" }), undefined);
  equal(proxyOnlyGateway({ "user.isx.role": "proxy-only" }), undefined);
});

/** An event source the test pushes into. */
class Changes {
  #wake: (() => void) | undefined;
  #pending = 0;
  push() {
    this.#pending++;
    this.#wake?.();
  }
  async *iterate(signal: AbortSignal): AsyncIterable<unknown> {
    while (!signal.aborted) {
      if (this.#pending === 0) {
        await new Promise<void>((r) => {
          this.#wake = r;
          signal.addEventListener("abort", () => r(), { once: true });
        });
        this.#wake = undefined;
        continue;
      }
      this.#pending--;
      yield 1;
    }
  }
}

async function until(what: string, f: () => boolean): Promise<void> {
  const end = Date.now() + 5000;
  while (!f()) {
    if (Date.now() > end) throw new TypeError(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

Deno.test("BridgeFollower serves the gateway while the bridge exists, follows changes and stops on close", async () => {
  let gateway: string | undefined;
  const log: string[] = [];
  const changes = new Changes();
  const f = new BridgeFollower({
    read: () => Promise.resolve(gateway),
    serve: (g) => {
      log.push(`serve ${g}`);
      return Promise.resolve();
    },
    unserve: (g) => {
      log.push(`unserve ${g}`);
      return Promise.resolve();
    },
    changes: (s) => changes.iterate(s),
    periodMs: 60_000,
  });
  await f.start();
  equal(f.serving, undefined);
  gateway = "10.78.254.1";
  changes.push();
  await until("serving", () => f.serving === "10.78.254.1");
  gateway = "10.78.253.1";
  await f.sync();
  gateway = undefined;
  changes.push();
  await until("stopped", () => f.serving === undefined);
  gateway = "10.78.252.1";
  await f.sync();
  await f.close();
  assertEquals(log, [
    "serve 10.78.254.1",
    "unserve 10.78.254.1",
    "serve 10.78.253.1",
    "unserve 10.78.253.1",
    "serve 10.78.252.1",
    "unserve 10.78.252.1",
  ]);
});

Deno.test("BridgeFollower retries a failed serve on the next look", async () => {
  let fail = true;
  const f = new BridgeFollower({
    read: () => Promise.resolve("10.78.254.1"),
    serve: () => fail ? Promise.reject(new TypeError("bind failed")) : Promise.resolve(),
    unserve: () => Promise.resolve(),
    periodMs: 60_000,
  });
  await f.start();
  equal(f.serving, undefined);
  fail = false;
  await f.sync();
  equal(f.serving, "10.78.254.1");
  await f.close();
});
