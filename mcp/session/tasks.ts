/**
 * The task tools' machinery over the guest task engine (`mcp/tasks`): the engine reads and
 * writes the guest's task files; this adapter keeps the session's registry in step, reserves
 * `max_concurrent_tasks` slots before a launch (§3.8), feeds states it learns for free to the
 * listeners (launch → running, a status read, an adoption), and runs the watcher only while
 * someone listens, so a client that never asked is never polled.
 *
 * @module
 */

import { hasCode } from "../../rpc/base.ts";
import { readStamps } from "../host/stamps.ts";
import {
  BusyElsewhere,
  joinCommand,
  type TaskEngine,
  TaskSlots,
  TaskWatcher,
  withPresence,
} from "../tasks/mod.ts";
import { RefusalError } from "../errors.ts";
import { userInstances } from "./create.ts";
import { MCP_STAMP } from "./holding.ts";
import type { Session, TaskService } from "./session.ts";
import type { TaskEntry } from "./types.ts";

function lastLines(text: string, n: number): string {
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines.slice(-n).join("\n");
}

/** The task service of one session over `engine`. */
export function engineTasks(engine: TaskEngine): TaskService {
  const slots = new TaskSlots();
  let elsewhere: BusyElsewhere | undefined;
  let watcher: TaskWatcher | undefined;

  const register = (s: Session, t: TaskEntry) => {
    s.tasks.set(t.id, t);
    watcher?.watch(t.instance, t.id, t.run, { agent: t.kind === "agent" });
  };

  const counts = async (s: Session) => {
    elsewhere ??= new BusyElsewhere((i) => engine.list(i));
    const others = (await userInstances(s)).filter((i) =>
      !s.held.has(i.name) && i.status === "Running" &&
      !(readStamps(i.config)[MCP_STAMP.kept] && s.standingOf(i).kind !== "held_elsewhere")
    ).map((i) => i.name);
    const mine = [...s.tasks.values()].filter((t) => t.state === "running" || t.state === "unknown")
      .length;
    return { mine, elsewhere: await elsewhere.count(others) };
  };

  return {
    foreground: (instance, o) =>
      engine.runForeground(instance, {
        command: o.command,
        cwd: o.cwd,
        ...(o.env ? { env: o.env } : {}),
        ...(o.stdin !== undefined ? { stdin: o.stdin } : {}),
        ...(o.timeoutSeconds ? { timeoutSeconds: o.timeoutSeconds } : {}),
        outputBytes: o.outputBytes,
        signal: o.signal,
        ...(o.onLine ? { onOutputLine: o.onLine } : {}),
      }),

    async startCommand(s, instance, o) {
      const max = s.deps.readConfig().maxConcurrentTasks;
      const r = await slots.reserve(max, () => counts(s));
      if (!r.ok) throw new RefusalError("limit", r.message);
      try {
        const id = s.newTaskId();
        const started = await engine.startCommand(instance, {
          taskId: id,
          command: o.command,
          cwd: o.cwd,
          ...(o.env ? { env: o.env } : {}),
          ...(o.key ? { key: o.key } : {}),
        });
        const t: TaskEntry = {
          id,
          instance,
          kind: "command",
          run: started.run,
          state: "running",
          command: o.command,
          ...(o.key ? { key: o.key } : {}),
        };
        register(s, t);
        s.report(t, "running");
        return t;
      } finally {
        r.reservation.release();
      }
    },

    async launchAgent(s, o) {
      const max = s.deps.readConfig().maxConcurrentTasks;
      const r = await slots.reserve(max, () => counts(s));
      if (!r.ok) throw new RefusalError("limit", r.message);
      try {
        const id = o.existing?.id ?? s.newTaskId();
        const l = await o.prepare(id);
        await engine.launch(l.instance, {
          taskId: id,
          run: l.run,
          kind: "agent",
          script: l.script,
          prompt: l.prompt,
          files: l.files,
          ...(l.key ? { key: l.key } : {}),
        }).catch((e) => {
          // the guest's own check: another session's agent runs there (one per instance)
          const busy = hasCode(e, "operation_failed") && e.data?.agent_busy;
          if (!busy) throw e;
          throw new RefusalError(
            "wrong_state",
            `instance "${l.instance}" already has a running agent task ${busy}; wait for it, or use template for parallel work`,
          );
        });
        const t: TaskEntry = o.existing ?? {
          id,
          instance: l.instance,
          kind: "agent",
          run: l.run,
          state: "running",
          ...(l.key ? { key: l.key } : {}),
        };
        t.run = l.run;
        t.agent = l.agent;
        register(s, t);
        s.report(t, "running");
        return t;
      } finally {
        r.reservation.release();
      }
    },

    async findKeyed(s, instance, key) {
      const found = (await engine.list(instance)).find((l) => l.key === key);
      if (!found) return undefined;
      if (!s.tasks.has(found.task_id)) {
        register(s, {
          id: found.task_id,
          instance,
          kind: found.kind ?? "command",
          run: found.run,
          state: found.state,
          key,
        });
      }
      return { task_id: found.task_id, run: found.run };
    },

    async status(s, t) {
      const st = await engine.status(t.instance, t.id);
      // spec §3.3 rule 4: a person in a finished agent's conversation makes it attached
      const p = withPresence(st, st.person);
      t.run = Math.max(t.run, st.run);
      s.report(t, p.state, p.exit_code);
      return {
        task_id: t.id,
        instance: t.instance,
        kind: t.kind,
        state: p.state,
        run: st.run,
        ...(st.exit_code !== undefined ? { exit_code: st.exit_code } : {}),
        ...(p.attached_pid !== undefined ? { attached_pid: p.attached_pid } : {}),
        ...(t.kind === "agent" || st.kind === "agent" ? { join_command: joinCommand(t.id) } : {}),
        ...(st.started_at ? { started_at: st.started_at } : {}),
        ...(st.last_activity ? { last_activity: st.last_activity } : {}),
        stdout_bytes: st.stdout_bytes,
        stderr_bytes: st.stderr_bytes,
        stdout_tail: lastLines(st.stdout_tail, 20),
        stderr_tail: lastLines(st.stderr_tail, 20),
      };
    },

    probe: (instance, ids) => engine.probe(instance, ids),

    async probeAttached(s, t) {
      const p = (await engine.probePresence(t.instance, [t.id])).get(t.id) ??
        { state: "unknown" as const, run: 0 };
      t.run = Math.max(t.run, p.run);
      s.report(t, p.state, p.exit_code);
      return {
        state: p.state,
        ...(p.attached_pid !== undefined ? { attached_pid: p.attached_pid } : {}),
      };
    },

    async result(s, t, maxBytes) {
      const r = await engine.result(t.instance, t.id, { outputBytes: maxBytes });
      if (r.state === "running") {
        throw new RefusalError(
          "wrong_state",
          `task ${t.id} is still running; wait_any or task_status with wait_seconds first`,
        );
      }
      s.report(t, r.state, r.exit_code);
      return {
        task_id: t.id,
        instance: t.instance,
        kind: t.kind,
        state: r.state,
        ...(r.exit_code !== undefined ? { exit_code: r.exit_code } : {}),
        stdout: r.stdout,
        stderr: r.stderr,
        stdout_bytes: r.stdout_bytes,
        stderr_bytes: r.stderr_bytes,
        truncated: r.truncated,
      };
    },

    async cancel(_s, instance, ids) {
      await engine.cancel(instance, ids);
    },

    async adopt(s, instance) {
      const listing = await engine.list(instance);
      for (const l of listing) {
        const known = s.tasks.get(l.task_id);
        register(s, {
          id: l.task_id,
          instance,
          kind: l.kind ?? "command",
          run: Math.max(l.run, known?.run ?? 0),
          state: l.state,
          ...(l.key ? { key: l.key } : {}),
        });
        watcher?.revive(instance, l.task_id);
      }
      return listing.map((l) => l.task_id);
    },

    async listStates(instance) {
      return (await engine.list(instance)).map((l) => ({ kind: l.kind ?? "", state: l.state }));
    },

    presence: (instance) => engine.presence(instance),

    watch(s) {
      watcher = new TaskWatcher({
        source: engine,
        emit: (c) => {
          const t = s.tasks.get(c.task_id);
          if (!t) return;
          t.run = Math.max(t.run, c.run);
          s.report(t, c.state, c.exit_code);
        },
      });
      for (const t of s.tasks.values()) {
        if (t.state === "running" || t.state === "unknown") {
          watcher.watch(t.instance, t.id, t.run, { agent: t.kind === "agent" });
        } else if (t.kind === "agent" && (t.state === "finished" || t.state === "attached")) {
          // a finished agent stays watched for join and leave (slow rounds)
          watcher.watch(t.instance, t.id, t.run, { agent: true, state: t.state });
        }
      }
      watcher.start();
      // holding is re-checked with one GET per instance with tasks: another session's
      // adoption reaches this one as `released`
      const stop = new AbortController();
      const holding = (async () => {
        while (!stop.signal.aborted) {
          await s.deps.sleep(10_000, stop.signal).catch(() => {});
          if (stop.signal.aborted) break;
          const names = new Set([...s.tasks.values()].map((t) => t.instance));
          await Promise.all([...names].map(async (name) => {
            try {
              const inst = (await s.incus.getInstance(name)).value;
              if (s.standingOf(inst).kind !== "mine" && s.held.has(name)) {
                s.forget(name, "released");
              }
            } catch (e) {
              if (hasCode(e, "not_found")) s.forget(name, "lost");
            }
          }));
        }
      })();
      const w = watcher;
      return () => {
        stop.abort();
        w.stop();
        if (watcher === w) watcher = undefined;
        void holding;
      };
    },
  };
}
