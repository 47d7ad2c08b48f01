/**
 * Debian's Chromium, headless, driven over the DevTools protocol with Deno's own WebSocket
 * (no puppeteer): launch with its own profile directory and no background traffic, open a
 * page, navigate, evaluate, wait for a condition, set the viewport, take a screenshot. One
 * browser WebSocket, pages as flattened target sessions. For the dashboard's browser test.
 *
 * @module
 */

import { browserPresent } from "./browser_gate.ts";

/** Where the browser is (`ISX_TEST_CHROMIUM` overrides). */
export const CHROMIUM = Deno.env.get("ISX_TEST_CHROMIUM") || "/usr/bin/chromium";

/** Whether the browser is installed. */
export function haveChromium(): boolean {
  return browserPresent(CHROMIUM);
}

type Pending = { resolve: (v: unknown) => void; reject: (e: Error) => void };

/** A headless Chromium. */
export class Browser implements AsyncDisposable {
  readonly #child: Deno.ChildProcess;
  readonly #ws: WebSocket;
  readonly #dir: string;
  readonly #drain: Promise<void>;
  #id = 0;
  readonly #pending = new Map<number, Pending>();
  readonly #closed: Promise<void>;

  private constructor(child: Deno.ChildProcess, ws: WebSocket, dir: string, drain: Promise<void>) {
    this.#child = child;
    this.#ws = ws;
    this.#dir = dir;
    this.#drain = drain;
    this.#closed = new Promise((r) => ws.addEventListener("close", () => r(), { once: true }));
    ws.addEventListener("message", (ev) => {
      const msg = JSON.parse(String(ev.data)) as {
        id?: number;
        result?: unknown;
        error?: { message: string };
      };
      if (msg.id === undefined) return;
      const p = this.#pending.get(msg.id);
      if (!p) return;
      this.#pending.delete(msg.id);
      if (msg.error) p.reject(new Error(`CDP: ${msg.error.message}`));
      else p.resolve(msg.result);
    });
  }

  /** Starts the browser and connects to it. */
  static async launch(): Promise<Browser> {
    const dir = await Deno.makeTempDir({ prefix: "isx-chromium-" });
    const child = new Deno.Command(CHROMIUM, {
      args: [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--metrics-recording-only",
        "--no-pings",
        "--hide-scrollbars",
        `--user-data-dir=${dir}`,
        "--remote-debugging-port=0",
        "about:blank",
      ],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
    let seen = "";
    let url: string | undefined;
    const deadline = Date.now() + 30_000;
    while (!url && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += value;
      url = /DevTools listening on (ws:\/\/\S+)/.exec(seen)?.[1];
    }
    const drain = (async () => {
      try {
        while (!(await reader.read()).done) { /* chromium's chatter */ }
      } catch { /* closed */ }
    })();
    if (!url) {
      child.kill("SIGKILL");
      await child.status;
      await drain;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
      throw new Error(`chromium did not start: ${seen.slice(-2000)}`);
    }
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener("open", () => resolve(), { once: true });
      ws.addEventListener("error", () => reject(new Error("CDP websocket failed")), { once: true });
    });
    return new Browser(child, ws, dir, drain);
  }

  /** Sends one command (to a page's session when `session` is given). */
  send<T = unknown>(method: string, params: unknown = {}, session?: string): Promise<T> {
    const id = ++this.#id;
    const p = new Promise<T>((resolve, reject) =>
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
    );
    this.#ws.send(
      JSON.stringify({ id, method, params, ...(session ? { sessionId: session } : {}) }),
    );
    return p;
  }

  /** A new page (tab) of `width`×`height`. */
  async newPage(width = 1280, height = 800): Promise<Page> {
    const { targetId } = await this.send<{ targetId: string }>("Target.createTarget", {
      url: "about:blank",
    });
    const { sessionId } = await this.send<{ sessionId: string }>("Target.attachToTarget", {
      targetId,
      flatten: true,
    });
    const page = new Page(this, sessionId);
    await page.send("Page.enable");
    await page.send("Runtime.enable");
    await page.viewport(width, height);
    return page;
  }

  /** Closes the browser and removes its profile. */
  async close(): Promise<void> {
    try {
      await this.send("Browser.close").catch(() => {});
    } finally {
      this.#ws.close();
      await this.#closed;
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

/** One page of the browser. */
export class Page {
  readonly #b: Browser;
  readonly #session: string;

  /** A page of `b` attached as `session`. */
  constructor(b: Browser, session: string) {
    this.#b = b;
    this.#session = session;
  }

  /** Sends a command to this page. */
  send<T = unknown>(method: string, params: unknown = {}): Promise<T> {
    return this.#b.send<T>(method, params, this.#session);
  }

  /** Sets the viewport (a phone's width is 390). */
  async viewport(width: number, height: number, mobile = false): Promise<void> {
    await this.send("Emulation.setDeviceMetricsOverride", {
      width,
      height,
      deviceScaleFactor: 1,
      mobile,
    });
  }

  /** Navigates and waits for the load event. */
  async goto(url: string): Promise<void> {
    await this.send("Page.navigate", { url });
    await this.waitFor("document.readyState === 'complete'", 15_000);
  }

  /** Evaluates `expression` in the page and returns its value. */
  async eval<T = unknown>(expression: string): Promise<T> {
    const r = await this.send<{ result: { value?: T }; exceptionDetails?: { text: string } }>(
      "Runtime.evaluate",
      { expression, returnByValue: true, awaitPromise: true },
    );
    if (r.exceptionDetails) throw new Error(`page: ${r.exceptionDetails.text}: ${expression}`);
    return r.result.value as T;
  }

  /** Waits until `expression` is truthy; returns how long it took (ms), or throws after `ms`. */
  async waitFor(expression: string, ms: number, everyMs = 50): Promise<number> {
    const start = performance.now();
    for (;;) {
      if (await this.eval<boolean>(`Boolean(${expression})`).catch(() => false)) {
        return performance.now() - start;
      }
      if (performance.now() - start > ms) {
        throw new Error(`not within ${ms} ms: ${expression}`);
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  }

  /** A PNG of the viewport (or, `full`, the whole page) written to `path`. */
  async screenshot(path: string, opts: { full?: boolean } = {}): Promise<void> {
    const { data } = await this.send<{ data: string }>("Page.captureScreenshot", {
      format: "png",
      captureBeyondViewport: opts.full === true,
    });
    await Deno.writeFile(path, Uint8Array.from(atob(data), (c) => c.charCodeAt(0)));
  }
}
