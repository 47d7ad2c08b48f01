/**
 * One `isx mcp` process is one session (§4.1): the holder of the instances it creates or
 * adopts, in both MCP eras (the stateless revision changes the wire, not who holds what).
 * The session keeps what it holds and the tasks it knows in memory, checks every named
 * instance's `mcp-session` stamp on each call (one read), and at its end stamps what it held
 * as orphaned so another session can adopt it (§4.4). Its world is injected
 * ({@link SessionDeps}): the Incus client, the config reader, the task engine, the clock.
 *
 * @module
 */

import type { IncusClient, Instance } from "../../rpc/base.ts";
import type { ForegroundOutcome, Held, TaskChange, TaskEntry, TaskStateWord } from "./types.ts";
import type { Definitions } from "../templates/load.ts";
import type { ProxyPlace } from "../instances/network.ts";
import type { McpConfig } from "./config.ts";
import { isNotFound } from "../../rpc/base.ts";
import { readStamps, withStamps } from "../host/stamps.ts";
import { RefusalError } from "../errors.ts";
import { holdRefusal, MCP_STAMP, type Standing, standing } from "./holding.ts";
import { type AuditEntry, auditLine } from "../audit.ts";
import { joinCommand } from "../tasks/presence.ts";

/** The task machinery the tools use (an adapter over the guest task engine, mcp/tasks). */
export interface TaskService {
  /**
   * Runs a foreground command; the signal kills its whole process session in the guest. A
   * `cwd` promise starts the exec while the caller's checks run; nothing runs until it
   * resolves, and its rejection is thrown.
   */
  foreground(instance: string, o: {
    command: string;
    env?: Record<string, string>;
    cwd: string | Promise<string>;
    stdin?: string;
    timeoutSeconds?: number;
    outputBytes: number;
    signal: AbortSignal;
    onLine?: (line: string) => void;
  }): Promise<ForegroundOutcome>;
  /** Starts a background command task and registers it. */
  startCommand(s: Session, instance: string, o: {
    command: string;
    env?: Record<string, string>;
    cwd: string;
    key?: string;
  }): Promise<TaskEntry>;
  /** The command tasks of an instance recorded under `key` (replay), if any. */
  findKeyed(
    s: Session,
    instance: string,
    key: string,
  ): Promise<{ task_id: string; run: number } | undefined>;
  /** Full status (one exec) as task_status answers it. */
  status(s: Session, t: TaskEntry): Promise<Record<string, unknown>>;
  /** Cheap probe of several tasks of one instance (one exec). */
  probe(instance: string, ids: string[]): Promise<Map<string, "running" | "done" | "unknown">>;
  /**
   * One task's state with the presence scan (one exec): `attached` (or `running`) with
   * `attached_pid` while a person is in its conversation (spec §3.3 rule 4).
   */
  probeAttached(s: Session, t: TaskEntry): Promise<{ state: TaskStateWord; attached_pid?: number }>;
  /** A finished command task's output. */
  result(s: Session, t: TaskEntry, maxBytes: number): Promise<Record<string, unknown>>;
  /** Cancels tasks (TERM, then KILL, of everything they started). */
  cancel(s: Session, instance: string, ids: string[]): Promise<void>;
  /** Registers the task records an instance holds; returns their ids. */
  adopt(s: Session, instance: string): Promise<string[]>;
  /** The kind and state of every task an instance records (the sweep's "in use"). */
  listStates(instance: string): Promise<{ kind: string; state: string }[]>;
  /** Person present, and the newest agent task-file write's age (the sweep's in use, dormancy). */
  presence(instance: string): Promise<{ present: boolean; writeAgeMs?: number }>;
  /**
   * Launches an agent run under a reserved `max_concurrent_tasks` slot: `prepare` (which may
   * create the instance) runs after the reservation; run 1 registers a new task, a later
   * run (`existing`) moves it on.
   */
  launchAgent(s: Session, o: {
    existing?: TaskEntry;
    prepare(taskId: string): Promise<AgentLaunch>;
  }): Promise<TaskEntry>;
  /** Starts polling the session's tasks for changes; returns the stop. */
  watch(s: Session): () => void;
}

/** One agent run to launch (the engine's launch of kind `agent`). */
export interface AgentLaunch {
  /** The instance. */
  instance: string;
  /** The run number. */
  run: number;
  /** The run script (bash; every value single-quoted). */
  script: string;
  /** The run's prompt. */
  prompt: string;
  /** More task files (`agent`, `cwd`, `model`, `brief.md`). */
  files: Record<string, string>;
  /** The idempotency key (run 1). */
  key?: string;
  /** The agent (kept on the entry). */
  agent: string;
}

/** `isx branch`'s checks around a copy (cli/instance_checks.ts), so MCP instances start alike. */
export interface BranchChecks {
  /** The preflight: refuses (IsbError not_ready) when the proxy cannot serve the template. */
  preflight(o: { action: string; template?: string; defs?: Definitions }): Promise<unknown>;
  /** Repairs the guest's trust store when the proxy serves another CA than `trusted`. */
  repairCa(name: string, health: unknown, trusted: string | undefined): Promise<boolean>;
}

/** What a session needs from the world. */
export interface SessionDeps {
  /** The branch preflight and CA repair (absent: none, as with --no-preflight). */
  checks?: BranchChecks;
  /** The task machinery (absent: task tools refuse `unavailable`). */
  tasks?: TaskService;
  /** The Incus client. */
  incus: IncusClient;
  /** Reads the mcp settings (every call). */
  readConfig(): McpConfig;
  /** Loads template definitions (trusted layers). */
  definitions(): Definitions;
  /** Where the proxy is, for branches. */
  proxyPlace(): Promise<ProxyPlace>;
  /** GET the proxy's `/activity`; undefined when nothing answers. */
  fetchActivity(): Promise<{ status: number; body: unknown } | undefined>;
  /** Whether `isx init` has been run. */
  initialized(): boolean;
  /** Appends an audit line. */
  audit(line: string): void;
  /** Whether another session is alive. */
  alive(session: string): boolean;
  /** This session's id (`<pid>-<start>`, or a coordinator's `instance:<name>:<grant>`). */
  id: string;
  /**
   * A coordinator's session (§10): the session is the instance, so the end of one
   * connection releases nothing; the next `isx mcp --caller-instance` holds it all again.
   */
  keepOnEnd?: boolean;
  /** The host user (mcp-owner). */
  owner: string;
  /** The server's pid and working directory (stamped). */
  pid: number;
  /** The working directory. */
  cwd: string;
  /** The clock. */
  now(): number;
  /** Sleeps; rejects when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Tells the proxy's dashboard a task's new state (fire and forget; absent: nobody). */
  reportTask?(fact: TaskFact): void;
}

/** A task change with what the dashboard shows of its task (`POST /tasks` on the ops port). */
export interface TaskFact extends TaskChange {
  /** command or agent. */
  kind: "command" | "agent";
  /** An agent task's agent. */
  agent?: string;
  /** How a person joins an agent task's conversation. */
  join?: string;
  /** The reporting session. */
  session: string;
  /** Its client's name. */
  client: string;
}

const TAG_CHARS = "abcdefghijklmnopqrstuvwxyz234567";

/** Random characters of `[a-z2-7]`. */
export function randomTag(n: number): string {
  const bytes = crypto.getRandomValues(new Uint8Array(n));
  return [...bytes].map((b) => TAG_CHARS[b % 32]).join("");
}

/** One server process's session. */
export class Session {
  /** The injected world. */
  readonly deps: SessionDeps;
  /** The client's name from initialize or the request's clientInfo. */
  clientName = "unknown";
  /** Instances held, by name. */
  readonly held: Map<string, Held> = new Map();
  /** Tasks known, by id. */
  readonly tasks: Map<string, TaskEntry> = new Map();
  /** Keys whose first call is still under way here. */
  readonly keysInFlight: Set<string> = new Set();
  #tag = randomTag(4);
  #counter = 0;
  #listeners = new Set<(c: TaskChange) => void>();
  #reported = new Map<string, string>();

  /** A session over `deps`. */
  constructor(deps: SessionDeps) {
    this.deps = deps;
  }

  /** The Incus client. */
  get incus(): IncusClient {
    return this.deps.incus;
  }

  /** A fresh task id `t<n>-<tag>` (§3.1). */
  newTaskId(): string {
    return `t${++this.#counter}-${this.#tag}`;
  }

  /** Subscribes to task changes; returns the unsubscribe. */
  onChange(fn: (c: TaskChange) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  /** Whether anyone listens to task changes. */
  get watched(): boolean {
    return this.#listeners.size > 0;
  }

  /** Records a task's state and tells listeners once per transition (never `unknown`). */
  report(t: TaskEntry, state: TaskStateWord | "released", exit?: number): void {
    if (state !== "released") t.state = state;
    if (state === "unknown") return;
    const mark = `${t.run}:${state}`;
    if (this.#reported.get(t.id) === mark) return;
    this.#reported.set(t.id, mark);
    const change: TaskChange = {
      task_id: t.id,
      instance: t.instance,
      run: t.run,
      state,
      ...(state === "finished" && exit !== undefined ? { exit_code: exit } : {}),
    };
    for (const fn of this.#listeners) fn(change);
    this.deps.reportTask?.({
      ...change,
      kind: t.kind,
      ...(t.agent ? { agent: t.agent } : {}),
      ...(t.kind === "agent" ? { join: joinCommand(t.id) } : {}),
      session: this.deps.id,
      client: this.clientName,
    });
  }

  /** Writes an audit line. */
  audit(e: Omit<AuditEntry, "session">): void {
    this.deps.audit(auditLine({ session: this.deps.id, ...e }, new Date(this.deps.now())));
  }

  /** The standing of an instance's stamps for this session. */
  standingOf(inst: Instance): Standing {
    return standing(
      readStamps(inst.config),
      { owner: this.deps.owner, session: this.deps.id },
      (s) => this.deps.alive(s),
    );
  }

  /** The holder stamps this session writes. */
  holderStamps(): Record<string, string> {
    return {
      [MCP_STAMP.owner]: this.deps.owner,
      [MCP_STAMP.session]: this.deps.id,
      [MCP_STAMP.client]: this.clientName,
      [MCP_STAMP.clientPid]: String(this.deps.pid),
      [MCP_STAMP.cwd]: this.deps.cwd,
      [MCP_STAMP.orphaned]: "",
    };
  }

  /**
   * Checks that this session holds `name` (registry and the instance's own stamp, one read)
   * and that no operation is pending on it; returns the instance.
   */
  async requireHeld(name: string): Promise<Instance> {
    let inst: Instance | undefined;
    try {
      inst = (await this.incus.getInstance(name)).value;
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    if (!inst) {
      this.forget(name, "lost");
      throw new RefusalError("not_found", `instance "${name}" does not exist (any more)`);
    }
    const refused = holdRefusal(name, this.standingOf(inst), this.held.has(name));
    if (refused) {
      if (refused.lost) this.forget(name, "released");
      throw refused.error;
    }
    const pending = readStamps(inst.config)[MCP_STAMP.pendingOp];
    if (pending) {
      throw new RefusalError("busy", `instance "${name}" is busy (${pending}); retry shortly`);
    }
    return inst;
  }

  /** Forgets an instance and its tasks, reporting running ones as `state`. */
  forget(name: string, state: "lost" | "released"): void {
    this.held.delete(name);
    for (const t of [...this.tasks.values()]) {
      if (t.instance !== name) continue;
      if (state === "released" || t.state === "running") this.report(t, state);
      this.tasks.delete(t.id);
    }
  }

  /** Stamps every held, ready, non-kept instance as orphaned by this session (§4.4). */
  async release(): Promise<void> {
    if (this.deps.keepOnEnd) return void this.held.clear();
    const mine = [...this.held.values()].filter((h) => h.state === "ready" && !h.kept);
    await Promise.all(mine.map((h) => this.releaseOne(h.name)));
    this.held.clear();
  }

  /** Stamps one instance as orphaned by this session (if it still holds it) and forgets it. */
  async releaseOne(name: string): Promise<void> {
    const mark = `${new Date(this.deps.now()).toISOString()} ${this.deps.id}`;
    const t0 = this.deps.now();
    try {
      await this.incus.updateInstance(name, (i) => {
        if (readStamps(i.config)[MCP_STAMP.session] !== this.deps.id) return i;
        return withStamps({ [MCP_STAMP.orphaned]: mark })(i);
      }, { step: `release ${name}` });
      this.audit({ tool: "release", instance: name, outcome: "released", ms: 0 });
    } catch (e) {
      const outcome = `failed: ${(e as Error).message}`;
      this.audit({ tool: "release", instance: name, outcome, ms: this.deps.now() - t0 });
    }
    this.held.delete(name);
  }
}
