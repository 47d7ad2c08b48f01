/**
 * Debian's Firefox ESR, headless, driven over WebDriver BiDi (its remote protocol, a
 * WebSocket on loopback) with Deno's own WebSocket (no geckodriver, no selenium): launch with
 * its own profile (every non-loopback request sent to a dead loopback proxy port, so the
 * browser's background traffic never leaves the machine), open the top-level context, set the
 * viewport, navigate, evaluate, wait for a condition, take a screenshot. The Firefox
 * counterpart of tests/helpers/cdp.ts, for the dashboard's Firefox test.
 *
 * @module
 */

import { browserPresent } from "./browser_gate.ts";

/** Where the browser is (`ISX_TEST_FIREFOX` overrides). */
export const FIREFOX = Deno.env.get("ISX_TEST_FIREFOX") || "/usr/bin/firefox-esr";

/** Whether the browser is installed. */
export function haveFirefox(): boolean {
  return browserPresent(FIREFOX);
}

// loopback stays direct (Firefox never proxies localhost by default); everything else goes to
// port 9 on loopback, where nothing listens: no DNS, no request leaves the machine
const PREFS: Record<string, string | number | boolean> = {
  "network.proxy.type": 1,
  "network.proxy.http": "127.0.0.1",
  "network.proxy.http_port": 9,
  "network.proxy.ssl": "127.0.0.1",
  "network.proxy.ssl_port": 9,
  "network.proxy.share_proxy_settings": true,
  "network.proxy.allow_hijacking_localhost": false,
  "network.trr.mode": 5,
  "network.dns.disablePrefetch": true,
  "network.prefetch-next": false,
  "network.captive-portal-service.enabled": false,
  "network.connectivity-service.enabled": false,
  "app.update.enabled": false,
  "app.normandy.enabled": false,
  "browser.safebrowsing.malware.enabled": false,
  "browser.safebrowsing.phishing.enabled": false,
  "browser.safebrowsing.downloads.enabled": false,
  "datareporting.healthreport.uploadEnabled": false,
  "datareporting.policy.dataSubmissionEnabled": false,
  "toolkit.telemetry.enabled": false,
  "messaging-system.rsexperimentloader.enabled": false,
  "extensions.update.enabled": false,
  "browser.shell.checkDefaultBrowser": false,
  "browser.startup.homepage_override.mstone": "ignore",
};

type Pending = { resolve: (v: unknown) => void; reject: (e: Error) => void };

/** A headless Firefox with one top-level browsing context. */
export class Firefox implements AsyncDisposable {
  readonly #child: Deno.ChildProcess;
  readonly #ws: WebSocket;
  readonly #dir: string;
  readonly #drain: Promise<void>;
  readonly #closed: Promise<void>;
  readonly #pending = new Map<number, Pending>();
  #id = 0;
  #context = "";

  private constructor(child: Deno.ChildProcess, ws: WebSocket, dir: string, drain: Promise<void>) {
    this.#child = child;
    this.#ws = ws;
    this.#dir = dir;
    this.#drain = drain;
    this.#closed = new Promise((r) => ws.addEventListener("close", () => r(), { once: true }));
    ws.addEventListener("message", (ev) => {
      const msg = JSON.parse(String(ev.data)) as {
        id?: number;
        type?: string;
        result?: unknown;
        error?: string;
        message?: string;
      };
      if (msg.id === undefined) return;
      const p = this.#pending.get(msg.id);
      if (!p) return;
      this.#pending.delete(msg.id);
      if (msg.type === "error") p.reject(new Error(`BiDi: ${msg.error}: ${msg.message}`));
      else p.resolve(msg.result);
    });
  }

  /** Starts the browser, opens a BiDi session and finds its top-level context. */
  static async launch(width = 1280, height = 800): Promise<Firefox> {
    const dir = await Deno.makeTempDir({ prefix: "isx-firefox-" });
    await Deno.writeTextFile(
      `${dir}/user.js`,
      Object.entries(PREFS).map(([k, v]) =>
        `user_pref(${JSON.stringify(k)}, ${JSON.stringify(v)});`
      )
        .join("\n") + "\n",
    );
    const child = new Deno.Command(FIREFOX, {
      args: ["--headless", "--no-remote", "--profile", dir, "--remote-debugging-port=0"],
      env: { MOZ_CRASHREPORTER_DISABLE: "1" },
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
    let seen = "";
    let url: string | undefined;
    const deadline = Date.now() + 60_000;
    while (!url && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += value;
      url = /WebDriver BiDi listening on (ws:\/\/\S+)/.exec(seen)?.[1];
    }
    const drain = (async () => {
      try {
        while (!(await reader.read()).done) { /* firefox's chatter */ }
      } catch { /* closed */ }
    })();
    const fail = async (why: string) => {
      try {
        child.kill("SIGKILL");
      } catch { /* gone */ }
      await child.status;
      await drain;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
      return new Error(`firefox: ${why}: ${seen.slice(-2000)}`);
    };
    if (!url) throw await fail("did not start");
    const ws = new WebSocket(`${url}/session`);
    const opened = await new Promise<boolean>((resolve) => {
      ws.addEventListener("open", () => resolve(true), { once: true });
      ws.addEventListener("error", () => resolve(false), { once: true });
    });
    if (!opened) throw await fail("the BiDi websocket failed");
    const ff = new Firefox(child, ws, dir, drain);
    try {
      await ff.send("session.new", { capabilities: {} });
      const tree = await ff.send<{ contexts: { context: string }[] }>("browsingContext.getTree", {
        maxDepth: 0,
      });
      ff.#context = tree.contexts[0]!.context;
      await ff.send("browsingContext.setViewport", {
        context: ff.#context,
        viewport: { width, height },
      });
    } catch (e) {
      await ff.close();
      throw e;
    }
    return ff;
  }

  /** Sends one command. */
  send<T = unknown>(method: string, params: unknown = {}): Promise<T> {
    const id = ++this.#id;
    const p = new Promise<T>((resolve, reject) =>
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
    );
    this.#ws.send(JSON.stringify({ id, method, params }));
    return p;
  }

  /** Navigates the context and waits for the load event. */
  async goto(url: string): Promise<void> {
    await this.send("browsingContext.navigate", { context: this.#context, url, wait: "complete" });
  }

  /** Evaluates `expression` in the page; returns its value (JSON-able values only). */
  async eval<T = unknown>(expression: string): Promise<T> {
    const r = await this.send<{
      type: "success" | "exception";
      result?: unknown;
      exceptionDetails?: { text: string };
    }>("script.evaluate", {
      // JSON across, so the result is one string and not BiDi's typed tree
      expression: `(async () => JSON.stringify(await (${expression})))()`,
      target: { context: this.#context },
      awaitPromise: true,
      resultOwnership: "none",
    });
    if (r.type === "exception") {
      throw new Error(`page: ${r.exceptionDetails?.text}: ${expression}`);
    }
    const v = r.result as { type: string; value?: string };
    return v.type === "string" && v.value !== undefined ? JSON.parse(v.value) as T : undefined as T;
  }

  /** Waits until `expression` is truthy; returns how long it took (ms), or throws after `ms`. */
  async waitFor(expression: string, ms: number, everyMs = 50): Promise<number> {
    const start = performance.now();
    for (;;) {
      if (await this.eval<boolean>(`Boolean(${expression})`).catch(() => false)) {
        return performance.now() - start;
      }
      if (performance.now() - start > ms) throw new Error(`not within ${ms} ms: ${expression}`);
      await new Promise((r) => setTimeout(r, everyMs));
    }
  }

  /** A PNG of the viewport; returns its bytes (written to `path` when given). */
  async screenshot(path?: string): Promise<Uint8Array> {
    const { data } = await this.send<{ data: string }>("browsingContext.captureScreenshot", {
      context: this.#context,
    });
    const png = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
    if (path) await Deno.writeFile(path, png);
    return png;
  }

  /** Closes the browser and removes its profile. */
  async close(): Promise<void> {
    try {
      await Promise.race([
        this.send("browser.close").catch(() => {}),
        new Promise((r) => setTimeout(r, 5000)),
      ]);
    } finally {
      this.#ws.close();
      await Promise.race([this.#closed, new Promise((r) => setTimeout(r, 5000))]);
      const t = setTimeout(() => {
        try {
          this.#child.kill("SIGKILL");
        } catch { /* gone */ }
      }, 5000);
      await this.#child.status;
      clearTimeout(t);
      await this.#drain;
      await Deno.remove(this.#dir, { recursive: true }).catch(() => {});
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
