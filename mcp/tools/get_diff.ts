/**
 * `get_diff` (§2.11): what an agent task changed in every git repository recorded at its
 * first run, against the commit it started from, read in the guest in one exec. With `ask`,
 * the template's summary agent answers a question about the diff's text form instead.
 *
 * @module
 */

import * as z from "zod";
import { RefusalError } from "../errors.ts";
import { guestDiff } from "../delegate/guest.ts";
import { known } from "./_agent_common.ts";
import { TaskId, tool } from "./def.ts";
import { requireRunning } from "./exec.ts";
import { Answer, prepareAsk } from "./_ask.ts";

/** The `get_diff` tool. */
export const getDiff = tool({
  name: "get_diff",
  description:
    "What an agent task changed: for every git repository recorded at its first run, committed + uncommitted + untracked changes against the commit it started from (numstat per file, and the patch unless stat or too large). ask: a question the template's summary agent answers about the diff, returned as answer alone.",
  input: () =>
    z.strictObject({
      task_id: TaskId,
      path: z.string().min(1).max(1024).optional(),
      stat: z.boolean().optional(),
      max_bytes: z.number().int().optional(),
      ask: z.string().optional(),
    }),
  output: () =>
    z.strictObject({
      // with ask: only answer
      answer: Answer().optional(),
      repos: z.array(z.strictObject({
        repo: z.string(),
        files: z.array(z.strictObject({
          path: z.string(),
          added: z.number().int().nullable(),
          deleted: z.number().int().nullable(),
        })),
      })).optional(),
      patch: z.string().optional(),
      patch_bytes: z.number().int().optional(),
      too_large: z.boolean().optional(),
    }),
  hints: { readOnly: true, idempotent: true },
  async run(args, { session: s, signal, progress }) {
    const t = known(s, args.task_id);
    if (t.kind !== "agent") {
      throw new RefusalError(
        "invalid_argument",
        `task ${t.id} is a command task; get_diff reads agent tasks`,
      );
    }
    if (args.ask !== undefined && args.stat) {
      throw new RefusalError("invalid_argument", "get_diff: give ask or stat, not both");
    }
    await requireRunning(s, t.instance);
    const ask = args.ask !== undefined
      ? prepareAsk(s, { tool: "get_diff", instance: t.instance, question: args.ask })
      : undefined;
    // with ask, the agent reads the text form (its last 400 KiB) of a patch up to the maximum
    const maxBytes = ask
      ? 1024 * 1024
      : Math.min(1024 * 1024, Math.max(1024, args.max_bytes ?? 256 * 1024));
    const d = await guestDiff(s.incus, t.instance, t.id, {
      sub: "diff",
      ...(args.path !== undefined ? { path: args.path } : {}),
      ...(args.stat ? { stat: true } : {}),
      maxBytes,
    });
    const repos = d.repos.map((r) => ({
      repo: r.repo,
      files: r.files.map((f) => ({ path: f.path, added: f.added, deleted: f.deleted })),
    }));
    const structured = {
      repos,
      ...(args.stat ? {} : {
        ...(d.patch !== undefined && !d.too_large ? { patch: d.patch } : {}),
        patch_bytes: d.patch_bytes,
        too_large: d.too_large,
      }),
    };
    const lines: string[] = [];
    let files = 0, add = 0, del = 0;
    for (const r of repos) {
      lines.push(`${r.repo}:`);
      for (const f of r.files) {
        files++;
        add += f.added ?? 0;
        del += f.deleted ?? 0;
        lines.push(`${f.added ?? "-"}\t${f.deleted ?? "-"}\t${f.path}`);
      }
    }
    const text = repos.length
      ? `${lines.join("\n")}\n ${files} files changed, ${add} insertions(+), ${del} deletions(-)` +
        (structured.patch !== undefined ? `\n---\n${structured.patch}` : "") +
        (d.too_large ? `\n---\n(the patch is ${d.patch_bytes} bytes, over max_bytes)` : "")
      : "No repository was recorded at the task's first run: nothing to compare.";
    if (ask) {
      // no repository: nothing to summarise (the agent is not run for that)
      const answer = await ask.answer(repos.length ? text : "", { signal, progress });
      return {
        structured: { answer },
        text: `${answer.text}\n\n(asked ${ask.who.agent} about the diff: ${answer.summarised})`,
        audit: `ask=${ask.who.agent}`,
      };
    }
    return { structured, text };
  },
});
