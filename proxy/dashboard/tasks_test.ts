import { deepStrictEqual, equal, throws } from "node:assert/strict";
import { parseTaskReport, TaskBoard, TASKS_KEPT } from "./tasks.ts";
import { IsbError } from "../../rpc/errors.ts";

const R = { task_id: "t1-abcd", instance: "i1", kind: "command", run: 1, state: "running" };

Deno.test("parseTaskReport refuses unknown fields, bad states and control characters by name", () => {
  const CASES: [Record<string, unknown>, string][] = [
    [{ ...R, extra: 1 }, "extra"],
    [{ ...R, state: "done" }, "state"],
    [{ ...R, run: -1 }, "run"],
    [{ ...R, instance: "a b" }, "instance"],
    [{ ...R, join: "x\u001b[2J" }, "join"],
    [{ ...R, exit_code: 999 }, "exit_code"],
  ];
  for (const [v, field] of CASES) {
    throws(() => parseTaskReport(v), (e) => e instanceof IsbError && e.message.includes(field));
  }
  deepStrictEqual(parseTaskReport({ ...R, exit_code: 0, agent: "claude" }), {
    ...R,
    exit_code: 0,
    agent: "claude",
  });
});

Deno.test("TaskBoard keeps the newest run's report, drops an older run's, and stays bounded", () => {
  const b = new TaskBoard();
  b.report(parseTaskReport({ ...R, run: 2, state: "finished", exit_code: 1 }), 10);
  equal(b.report(parseTaskReport({ ...R, run: 1, state: "running" }), 11), false);
  b.report(parseTaskReport({ ...R, run: 3, state: "running" }), 12);
  const [t] = b.list();
  deepStrictEqual([t!.run, t!.state, t!.exit_code, t!.first_seen, t!.updated], [
    3,
    "running",
    undefined,
    10,
    12,
  ]);
  for (let i = 0; i < TASKS_KEPT + 5; i++) {
    b.report(parseTaskReport({ ...R, task_id: `t${i}-x` }), i);
  }
  equal(b.list().length, TASKS_KEPT);
});
