/**
 * The bench for the agent runners against real agents: a branch of the `tpl-agents`
 * template (as `isx branch` makes it: the proxy gives credentials only to pinned, stamped
 * instances), the real proxy (in this process) intercepting two test-only names through the
 * bridge's DNS and TLS with its own CA, and the scripted model mocks on loopback behind it.
 * The agents are pointed at the test names (Claude by ANTHROPIC_BASE_URL, Pi, opencode and
 * Codex by their config files), hold only the template's placeholders, and the proxy puts
 * the "real" keys below on the way out. Runs the runner as the guest would: `deno run` of
 * guest/agents/main.ts, pushed as it is, under the grants of agentRunnerArgv. The proxy's
 * setup is `_agents_proxy.ts`, the agents' configuration `_agents_config.ts`, the
 * template's `_agents_template.ts`.
 *
 * @module
 */

import { equal } from "node:assert/strict";
import { createIncusClient, type IncusClient, isNotFound } from "../../rpc/mod.ts";
import { branchInstance, execRecorded, SLOW_DAEMON_MS } from "../../mcp/mod.ts";
import { loadCa } from "../../proxy/tls/ca.ts";
import type { ClientRegistry } from "../../proxy/callers/clients.ts";
import { applyDns, bridgeGateway } from "../../proxy/host/dns.ts";
import { parseActivity } from "../../proxy/mod.ts";
import {
  AGENT_RUNNER_FILES,
  type AgentEvent,
  type AgentName,
  agentRunScript,
  type DiffResult,
  diffRunnerArgv,
  readAgentRunnerFile,
} from "../../guest/mod.ts";
import { startMockAnthropic } from "../fakes/mock_anthropic.ts";
import { startMockOpenAI } from "../fakes/mock_openai.ts";
import type { MockServer } from "../fakes/mock_model.ts";
import { LIVE_BRIDGE, LIVE_PROJECT, LIVE_SOCKET, ofLab, removeInstance, testName } from "./live.ts";
import { AGENTS_TEMPLATE } from "./_agents_template.ts";
import { type LabProxy, startLabProxy } from "./_agents_proxy.ts";
import { configureAgents, LOGIN_PROFILE, loginProfile } from "./_agents_config.ts";

export { AGENTS_TEMPLATE, ensureTemplate, haveTemplate } from "./_agents_template.ts";

/** The "real" keys the proxy holds; no guest may ever see them. */
export const REAL = {
  anthropic: "sk-ant-api03-RUNNERS-REAL-0123456789abcdef",
  openai: "sk-proj-RUNNERS-REAL-0123456789abcdef",
} as const;

const AGENT = { uid: 1000, gid: 1000, home: "/home/agentuser", name: "agentuser" };
const SCRIPTS = "/opt/isx-runner";
const BRIDGE = LIVE_BRIDGE; // the lab's (tests/helpers/lab.ts), never the user's
const CA_PATH = "/usr/local/share/ca-certificates/isx-proxy.crt";
/** The tasks' working directory in the guest (a git repository). */
export const PROJECT = "/home/agentuser/proj";

/** A finished (or stopped) run as the guest recorded it. */
export interface LabRun {
  /** The runner's exit code. */
  code: number;
  /** The runner's own stdout and stderr. */
  output: string;
  /** events-<n>.jsonl, parsed. */
  events: AgentEvent[];
  /** exit-<n>, if written. */
  exit?: string;
  /** session_id, if written. */
  session?: string;
}

/** The lab: open() it, use it, dispose it. */
export class AgentsLab implements AsyncDisposable {
  readonly incus: IncusClient;
  readonly name: string;
  /** An instance made elsewhere (e.g. by `isx mcp`): configured here, never created or removed. */
  readonly #external: boolean;
  readonly anthropic: MockServer = startMockAnthropic();
  readonly openai: MockServer = startMockOpenAI();
  readonly id = crypto.randomUUID().slice(0, 8);
  readonly domains = {
    anthropic: `api-${this.id}.anthropic.isx-test`,
    openai: `api-${this.id}.openai.isx-test`,
  };
  #tmp = Deno.makeTempDirSync({ prefix: "isx-runners-" });
  #registry: ClientRegistry | undefined;
  #proxy: LabProxy["proxy"] | undefined;
  #gateway = "";
  #created = false;
  tlsPort = 0;

  constructor(o: { instance?: string } = {}) {
    this.name = o.instance ?? testName("runners");
    this.#external = o.instance !== undefined;
    this.incus = createIncusClient({
      socket: LIVE_SOCKET,
      project: LIVE_PROJECT,
      timeouts: { requestMs: SLOW_DAEMON_MS },
    });
  }

  /** Starts the proxy and mocks, copies the template and configures its agents. */
  static async open(o: { instance?: string } = {}): Promise<AgentsLab> {
    const lab = new AgentsLab(o);
    try {
      await lab.#open();
      return lab;
    } catch (e) {
      await lab[Symbol.asyncDispose]();
      throw e;
    }
  }

  async #open(): Promise<void> {
    this.#gateway = (await bridgeGateway(this.incus, BRIDGE))!;
    const ca = await loadCa(`${this.#tmp}/ca`);
    const lp = await startLabProxy({
      incus: this.incus,
      gateway: this.#gateway,
      ca,
      keys: REAL,
      domains: this.domains,
      upstreams: { anthropic: this.anthropic.origin, openai: this.openai.origin },
    });
    this.#registry = lp.registry;
    this.#proxy = lp.proxy;
    this.tlsPort = this.#proxy.addrs.tls.port;
    await applyDns(this.incus, BRIDGE, {
      // only the two test names: never redirect a real host for the bridge's other guests
      names: [this.domains.anthropic, this.domains.openai],
      gateway: this.#gateway,
      tag: `isx-runners-${this.id}`,
    });
    this.#created = true;
    // a branch as isx makes it: pinned NICs and stamps, or the proxy gives it no credential
    if (!this.#external) {
      await branchInstance(this.incus, {
        name: this.name,
        template: AGENTS_TEMPLATE,
        proxy: { bridge: BRIDGE },
        network: "full",
      });
    }
    await this.#registry.refresh();
    await this.root(
      `update-ca-certificates >/dev/null; mkdir -p ${SCRIPTS}; ` +
        `for i in $(seq 120); do getent hosts ${this.domains.anthropic} | grep -q ${this.#gateway} && ` +
        `getent hosts ${this.domains.openai} | grep -q ${this.#gateway} && exit 0; sleep 0.5; done; exit 1`,
      { CA: ca.certPem },
      async () =>
        await this.incus.pushFile(this.name, CA_PATH, ca.certPem, { step: "push CA", mode: 0o644 }),
    );
    await this.root(`mkdir -p ${SCRIPTS}/agents ${SCRIPTS}/diff`);
    for (const f of AGENT_RUNNER_FILES) {
      await this.incus.pushFile(this.name, `${SCRIPTS}/${f}`, await readAgentRunnerFile(f), {
        step: `push ${f}`,
        mode: 0o644,
      });
    }
    await this.#configure();
  }

  /** Runs a script as root; `before` runs first (a push the script needs). */
  async root(
    script: string,
    env: Record<string, string> = {},
    before?: () => Promise<void>,
  ): Promise<string> {
    await before?.();
    const r = await execRecorded(this.incus, this.name, ["bash", "-c", script], {
      step: "root script",
      env,
    });
    equal(r.exitCode, 0, `${script}\n${r.stdout}${r.stderr}`);
    return r.stdout;
  }

  /** Runs a script as agentuser (with a login's variables from `env`). */
  async user(script: string, env: Record<string, string> = {}) {
    return await execRecorded(this.incus, this.name, ["bash", "-c", script], {
      step: "agentuser script",
      user: AGENT,
      env,
    });
  }

  async #push(path: string, text: string): Promise<void> {
    await this.incus.pushFile(this.name, path, text, {
      step: `push ${path}`,
      mode: 0o600,
      uid: AGENT.uid,
      gid: AGENT.gid,
    });
  }

  async #configure(): Promise<void> {
    await configureAgents({
      home: AGENT.home,
      project: PROJECT,
      anthropic: `https://${this.domains.anthropic}:${this.tlsPort}`,
      openai: `https://${this.domains.openai}:${this.tlsPort}/v1`,
      user: (script) => this.user(script),
      push: (path, text) => this.#push(path, text),
      pull: async (path) => (await this.incus.pullFile(this.name, path)).data,
    });
  }

  /** The environment a run gets: the template's placeholders, no forward proxy. */
  runEnv(): Record<string, string> {
    return {
      HOME: AGENT.home,
      USER: AGENT.name,
      PATH: "/usr/local/bin:/usr/bin:/bin",
      LANG: "C.UTF-8",
      ANTHROPIC_API_KEY: "sk-ant-placeholder",
      OPENAI_API_KEY: "sk-placeholder",
      NODE_EXTRA_CA_CERTS: CA_PATH,
      ANTHROPIC_BASE_URL: `https://${this.domains.anthropic}:${this.tlsPort}`,
      NO_PROXY: `${this.domains.anthropic},${this.domains.openai},localhost,127.0.0.1`,
    };
  }

  /** Puts {@link runEnv}'s endpoints in the login profile (what isx mcp starts goes through it). */
  async pushLoginEnv(): Promise<void> {
    const step = "push the lab's login env";
    await this.incus.pushFile(this.name, LOGIN_PROFILE, loginProfile(this.runEnv()), {
      step,
      mode: 0o644,
    });
  }

  /** The task directory of `task`. */
  taskDir(task: string): string {
    return `${AGENT.home}/.isx-mcp/tasks/${task}`;
  }

  /** Writes run n's files the host would (prompt, cwd, and anything in `files`). */
  async prepare(task: string, run: number, prompt: string, files: Record<string, string> = {}) {
    const dir = this.taskDir(task);
    await this.user(`mkdir -p ${dir}`);
    await this.#push(`${dir}/prompt-${run}.md`, prompt);
    if (run === 1) await this.#push(`${dir}/cwd`, `${PROJECT}\n`);
    for (const [name, text] of Object.entries(files)) await this.#push(`${dir}/${name}`, text);
  }

  /** Runs the run as the host would: its `run-<n>.sh` (agentRunScript) by bash as agentuser. */
  async run(agent: AgentName, task: string, run: number): Promise<LabRun> {
    const dir = this.taskDir(task);
    const script = agentRunScript({
      deno: "/usr/local/bin/deno",
      scripts: SCRIPTS,
      dir,
      run,
      agent,
      home: AGENT.home,
      task,
      cwd: PROJECT,
    });
    await this.#push(`${dir}/run-${run}.sh`, script);
    const r = await execRecorded(this.incus, this.name, ["bash", `${dir}/run-${run}.sh`], {
      step: `run ${agent}`,
      user: AGENT,
      env: this.runEnv(),
      cwd: AGENT.home,
      deadlineMs: 300_000,
    });
    const log = await this.#read(`${dir}/runner-${run}.log`);
    return { code: r.exitCode, output: log ?? "", ...(await this.files(task, run)) };
  }

  /** The lab proxy's forward proxy (`http://gateway:port`), for a guest's `HTTPS_PROXY`. */
  get forwardProxy(): string {
    return `http://${this.#gateway}:${this.#proxy!.addrs.forward.port}`;
  }

  /** The proxy's `/activity` entry of the lab's instance. */
  async activity() {
    const port = this.#proxy!.addrs.health[0]!.port;
    const res = await fetch(`http://127.0.0.1:${port}/activity`);
    return ofLab(parseActivity(await res.json())).instances[this.name]; // <project>/<name>
  }

  /** Sends `signal` to the runner of a task's run (as a cancel's TERM reaches it). */
  async signal(task: string, run: number, signal = "TERM"): Promise<void> {
    const dir = this.taskDir(task);
    await this.root(`pkill -${signal} -f -- "agents/main.ts --dir ${dir} --run ${run} "`);
  }

  /** The pids of processes that carry `ISX_MCP_TASK=<task>` (what a cancel sweeps). */
  async taskProcesses(task: string): Promise<string[]> {
    const out = await this.root(
      `for e in /proc/[0-9]*/environ; do tr '\\0' '\\n' <"$e" 2>/dev/null | grep -qx "ISX_MCP_TASK=${task}" && ` +
        `{ p=\${e#/proc/}; echo "\${p%/environ} $(tr '\\0' ' ' </proc/\${p%/environ}/cmdline)"; }; done; true`,
    );
    return out.split("\n").filter((l) => l.trim());
  }

  async #read(p: string): Promise<string | undefined> {
    try {
      return new TextDecoder().decode((await this.incus.pullFile(this.name, p)).data);
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  /** Runs get_diff's guest half for a task as the host would; its JSON answer. */
  async diff(task: string, cmd: { path?: string; stat?: boolean; maxBytes?: number } = {}) {
    const argv = diffRunnerArgv({
      deno: "/usr/local/bin/deno",
      scripts: SCRIPTS,
      dir: this.taskDir(task),
    }, { sub: "diff", ...cmd });
    const r = await execRecorded(this.incus, this.name, argv, {
      step: `diff ${task}`,
      user: AGENT,
      env: this.runEnv(),
      cwd: AGENT.home,
    });
    equal(r.exitCode, 0, r.stdout + r.stderr);
    return JSON.parse(r.stdout) as DiffResult;
  }

  /** Reads a run's files back. */
  async files(task: string, run: number): Promise<Omit<LabRun, "code" | "output">> {
    const dir = this.taskDir(task);
    const read = (p: string) => this.#read(p);
    const events = ((await read(`${dir}/events-${run}.jsonl`)) ?? "").split("\n").filter((l) => l)
      .map((l) => JSON.parse(l) as AgentEvent);
    const exit = await read(`${dir}/exit-${run}`);
    const session = await read(`${dir}/session_id`);
    return {
      events,
      ...(exit !== undefined ? { exit: exit.trim() } : {}),
      ...(session !== undefined ? { session: session.trim() } : {}),
    };
  }

  /** Removes the instance, the DNS block, the proxy and the mocks. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#created) {
      await applyDns(this.incus, BRIDGE, {
        names: [],
        gateway: this.#gateway,
        tag: `isx-runners-${this.id}`,
      }).catch(() => {});
      if (!this.#external) await removeInstance(this.incus, this.name).catch(() => {});
    }
    await this.#proxy?.close();
    await this.#registry?.close();
    await this.anthropic.close();
    await this.openai.close();
    this.incus.close();
    await Deno.remove(this.#tmp, { recursive: true }).catch(() => {});
  }
}
