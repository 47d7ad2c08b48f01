/**
 * A lab for warm-pool tests and benches (issue 21): an Incus project of its own
 * (`isxtest-pool-<id>`, with a default profile on the suite lab's bridge, tests/helpers/lab.ts),
 * the lab's built `tpl-minimal` copied into it (a btrfs snapshot: copy-on-write, like a
 * build's output), an isx home whose mcp.yaml approves it with a warm pool, the real proxy in
 * this process listening on the lab bridge's gateway on ports of its own (nothing of the
 * user's proxy, bridges, projects or nft tables is touched) with a mock Anthropic on loopback
 * behind it, and helpers to run `isx pool` and `isx mcp` as the user would, in the project.
 *
 * @module
 */

import { createIncusClient, type IncusClient, isNotFound } from "../../rpc/mod.ts";
import { execRecorded, readStamps, SLOW_DAEMON_MS } from "../../mcp/mod.ts";
import { ClientRegistry, incusSource } from "../../proxy/callers/clients.ts";
import { parseCredentials } from "../../proxy/config/credentials.ts";
import { loadCa } from "../../proxy/tls/ca.ts";
import { bridgeGateway } from "../../proxy/host/dns.ts";
import { Policy, startProxy } from "../../proxy/mod.ts";
import { startMockAnthropic } from "../fakes/mock_anthropic.ts";
import { LIVE_BRIDGE, LIVE_PROJECT, LIVE_SOCKET, removeInstance, until } from "./live.ts";
import { ensureBuilt } from "./built.ts";
import { makeHome, type McpHome } from "./mcp.ts";
import { type ProgramHandle, spawnProgram } from "./spawn.ts";

/** The template the lab copies (built in the suite's lab project when missing). */
export const SOURCE_TEMPLATE = "tpl-minimal";
/** The bridge members are on (the suite lab's, the profile's NIC and the pinned one). */
export const LAB_BRIDGE = LIVE_BRIDGE;

/** The lab. */
export class PoolLab implements AsyncDisposable {
  readonly id = crypto.randomUUID().slice(0, 8);
  readonly project = `isxtest-pool-${this.id}`;
  readonly admin: IncusClient = createIncusClient({ socket: LIVE_SOCKET });
  readonly incus: IncusClient = createIncusClient({
    socket: LIVE_SOCKET,
    project: this.project,
    timeouts: { requestMs: SLOW_DAEMON_MS },
  });
  readonly anthropic = startMockAnthropic();
  readonly domain = `api-${this.id}.anthropic.isx-test`;
  home!: McpHome;
  gateway = "";
  proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
  registry: ClientRegistry | undefined;
  #madeProject = false;
  #tmp = Deno.makeTempDirSync({ prefix: "isxtest-pool-" });

  /** Opens it: project, template, home (`pool` members of the template), proxy. */
  static async open(o: { pool?: number; proxy?: boolean } = {}): Promise<PoolLab> {
    const lab = new PoolLab();
    try {
      await lab.#open(o.pool ?? 1, o.proxy ?? true);
      return lab;
    } catch (e) {
      await lab[Symbol.asyncDispose]();
      throw e;
    }
  }

  async #open(pool: number, proxy: boolean): Promise<void> {
    await ensureBuilt(SOURCE_TEMPLATE);
    await this.admin.call("POST", "/1.0/projects", {
      body: {
        name: this.project,
        description: "isx warm-pool test (removed at its end)",
        config: {
          "features.images": "false",
          "features.profiles": "true",
          "features.storage.volumes": "false",
          "features.networks": "false",
        },
      },
    });
    this.#madeProject = true;
    // its default profile: the lab's bridge and the pool the lab's profile names
    const labProfile = await this.admin.withProject(LIVE_PROJECT)
      .call("GET", "/1.0/profiles/default").then((r) =>
        r.kind === "sync" ? r.metadata as { devices?: Record<string, Record<string, string>> } : {}
      );
    const storagePool =
      Object.values(labProfile.devices ?? {}).find((d) => d.type === "disk" && d.path === "/")
        ?.pool ?? "default";
    await this.incus.call("PUT", "/1.0/profiles/default", {
      body: {
        description: "isx warm-pool test",
        config: {},
        devices: {
          root: { type: "disk", path: "/", pool: storagePool },
          eth0: { type: "nic", name: "eth0", network: LAB_BRIDGE },
        },
      },
    });
    await this.copyTemplate();
    this.home = makeHome({
      mcp: `templates: [${SOURCE_TEMPLATE}]\nwarm-pool: {${SOURCE_TEMPLATE}: ${pool}}\n`,
    });
    this.home.env.INCUS_PROJECT = this.project;
    this.gateway = (await bridgeGateway(this.admin, LAB_BRIDGE))!;
    if (!proxy) return;
    const ca = await loadCa(`${this.#tmp}/ca`);
    this.registry = new ClientRegistry(incusSource(this.admin), {
      now: Date.now,
      minRefreshMs: 100,
    });
    await this.registry.start();
    this.proxy = await startProxy({
      listen: {
        tls: { hostname: this.gateway, port: 0 },
        forward: { hostname: this.gateway, port: 0 },
        health: [{ hostname: "127.0.0.1", port: 0 }],
      },
      policy: new Policy(
        parseCredentials(
          `anthropic: { accounts: { main: { api_key: sk-ant-real-${this.id} } } }\n`,
        ),
        { hosts: { anthropic: [this.domain] } },
      ),
      ca,
      clients: this.registry,
      upstreamOverrides: { [this.domain]: this.anthropic.origin },
      allowLoopbackTargets: true,
    });
  }

  /**
   * Copies the user's template into the project as a fresh build: a new instance with a new
   * build id (what `isx build` gives a rebuilt template), replacing any earlier copy.
   */
  async copyTemplate(template: string = SOURCE_TEMPLATE): Promise<string> {
    const buildId = `i-pool-${crypto.randomUUID().slice(0, 8)}`;
    await this.incus.deleteInstance(template, { step: "remove the old template" })
      .catch((e) => {
        if (!isNotFound(e)) throw e;
      });
    await this.incus.createInstance({
      name: template,
      source: { type: "copy", source: template, project: LIVE_PROJECT, instance_only: true },
      config: { "user.incus-spawn.build-id": buildId },
    }, { step: "copy the template into the lab project" });
    return buildId;
  }

  /** Runs `isx <args>` in the project with the lab's home; its stdout, stderr and code. */
  async isx(
    args: string[],
    timeoutMs = 300_000,
  ): Promise<{ code: number; out: string; err: string }> {
    await using p = this.spawn(args);
    await p.closeStdin();
    const lines: string[] = [];
    const reading = (async () => {
      for (;;) {
        const l = await p.readLine(timeoutMs);
        if (l === undefined) return;
        lines.push(l);
      }
    })();
    const st = await p.wait(timeoutMs);
    await reading;
    return { code: st.code, out: lines.join("\n"), err: p.stderr() };
  }

  /** Starts `isx <args>` (e.g. `pool keep`) in the project with the lab's home. */
  spawn(args: string[]): ProgramHandle {
    return spawnProgram(args, { env: { ...this.home.env }, prog: "isx", cwd: this.home.dir });
  }

  /** The names of the pool members in a state (`ready`, `filling`). */
  async members(state?: string): Promise<string[]> {
    const all = await this.incus.listInstances();
    return all.filter((i) => {
      const s = readStamps(i.config)["mcp-pool"];
      return s && (!state || s === state);
    }).map((i) => i.name).sort();
  }

  /** Waits until `n` members are ready; their names. */
  ready(n: number, ms = 240_000): Promise<string[]> {
    return until(`${n} ready pool member(s)`, async () => {
      const r = await this.members("ready");
      return r.length >= n ? r : undefined;
    }, ms);
  }

  /**
   * A model call from inside `name` through the lab proxy's forward port: the CONNECT's
   * status and the response's (`%{http_connect} %{http_code}`).
   */
  async modelCall(name: string): Promise<string> {
    const port = this.proxy!.addrs.forward.port;
    const r = await execRecorded(this.incus, name, [
      "curl",
      "-sk",
      "-o",
      "/dev/null",
      "-w",
      "%{http_connect} %{http_code}",
      "--max-time",
      "20",
      "--proxy",
      `http://${this.gateway}:${port}`,
      "-H",
      "content-type: application/json",
      "-H",
      "x-api-key: placeholder",
      "-d",
      '{"model":"claude-x","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}',
      `https://${this.domain}/v1/messages`,
    ], { step: "a model call through the lab proxy" });
    return r.stdout.trim();
  }

  /** The lab proxy's count of requests of an instance of the project (0 when unseen). */
  async requestsOf(name: string): Promise<number> {
    await this.registry!.refresh();
    const snap = this.proxy!.counter.snapshot(this.registry!.known()) as unknown as {
      instances: Record<string, { requests?: number; traffic_requests?: number }>;
    };
    const e = snap.instances[`${this.project}/${name}`];
    return (e?.requests ?? 0) + (e?.traffic_requests ?? 0);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.proxy?.close().catch(() => {});
    await this.registry?.close().catch(() => {});
    await this.anthropic.close().catch(() => {});
    if (this.#madeProject) {
      for (const i of await this.incus.listInstances().catch(() => [])) {
        await removeInstance(this.incus, i.name).catch(() => {});
      }
      await this.admin.call("DELETE", `/1.0/projects/${this.project}`, {}).catch((e) => {
        // deno-lint-ignore no-console
        console.error(`i-pool: could not remove project ${this.project}: ${e}`);
      });
    }
    this.incus.close();
    this.admin.close();
    try {
      Deno.removeSync(this.#tmp, { recursive: true });
    } catch { /* gone */ }
  }
}
