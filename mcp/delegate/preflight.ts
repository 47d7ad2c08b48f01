/**
 * The Claude model check of `delegate` and `send_message` (spec §2.6): before a run that
 * names a model, a one-turn, tool-less `claude -p --model <m>` in the instance, through its
 * proxy account, must answer a non-error `result`/`success` with exit 0; otherwise the call
 * is refused `refused` before anything starts. A success is cached per (template, model) for
 * the session (the account is the template's, fixed for it), a failure never is. The model
 * reaches the guest as an environment variable, never in the command text. Codex, Pi and
 * opencode have no such check (seed 000): they report model errors in the task result.
 *
 * @module
 */

import { RefusalError } from "../errors.ts";
import type { Session } from "../session/mod.ts";

/** The check's command: the login profile (the instance's endpoints), then one turn. */
export const MODEL_CHECK_SH =
  `. /etc/profile >/dev/null 2>&1; exec claude -p --model "$ISX_MODEL" --output-format json --tools '' --no-session-persistence`;

const passed = new WeakMap<Session, Set<string>>();

/** Whether Claude's JSON answer is a non-error success. Pure. */
export function modelCheckPassed(exit: number, stdout: string): { ok: boolean; why: string } {
  let v: Record<string, unknown> | undefined;
  for (const line of stdout.split("\n").reverse()) {
    try {
      const o = JSON.parse(line.trim());
      if (o && typeof o === "object" && o.type === "result") {
        v = o;
        break;
      }
    } catch { /* not the answer */ }
  }
  if (!v) return { ok: false, why: `no answer (exit ${exit})` };
  const ok = exit === 0 && v.subtype === "success" && v.is_error === false;
  const said = typeof v.result === "string" ? v.result.slice(0, 300) : String(v.subtype);
  return { ok, why: ok ? "" : `${said} (exit ${exit})` };
}

/** Checks `model` for Claude in `instance` (or knows it passed); refuses `refused`. */
export async function checkClaudeModel(
  s: Session,
  o: { instance: string; template: string; model: string; signal: AbortSignal },
): Promise<void> {
  const key = `${o.template}\0${o.model}`;
  const seen = passed.get(s) ?? new Set<string>();
  passed.set(s, seen);
  if (seen.has(key)) return;
  const tasks = s.deps.tasks;
  if (!tasks) throw new RefusalError("unavailable", "the task engine is not available");
  const r = await tasks.foreground(o.instance, {
    command: MODEL_CHECK_SH,
    env: { ISX_MODEL: o.model },
    cwd: "/tmp",
    stdin: "Reply with the single word OK.\n",
    timeoutSeconds: 90,
    outputBytes: 64 * 1024,
    signal: o.signal,
  });
  const v = modelCheckPassed(r.exit_code, r.stdout);
  if (!v.ok) {
    throw new RefusalError(
      "refused",
      `model "${o.model}" did not answer a one-turn check through this instance's Claude account: ${
        r.timed_out ? "no answer within 90 s" : v.why
      }; choose another model or leave model out`,
    );
  }
  seen.add(key);
}
