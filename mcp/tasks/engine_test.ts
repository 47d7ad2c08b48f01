import assert from "node:assert/strict";
import { type IncusClient, IsbError } from "../../rpc/mod.ts";
import { createTaskEngine } from "./engine.ts";

/** A guest that answers every script exec with `code` and `stderr`, recording the argv. */
function guest(code: number, stderr = "", stdout = "") {
  const calls: string[][] = [];
  const enc = new TextEncoder();
  const incus = {
    execCapture: (_n: string, argv: string[]) => {
      calls.push(argv);
      return Promise.resolve({
        exitCode: code,
        stdout: enc.encode(stdout),
        stderr: enc.encode(stderr),
      });
    },
  } as unknown as IncusClient;
  return { incus, calls };
}

const code = (c: string) => (e: unknown) => e instanceof IsbError && e.code === c;

Deno.test("createTaskEngine refuses bad input with code invalid and runs nothing", async () => {
  const g = guest(0);
  const e = createTaskEngine({ incus: g.incus });
  const bad: Array<[string, () => Promise<unknown>]> = [
    ["task id", () => e.startCommand("i", { taskId: "T1", command: "true" })],
    ["key", () => e.startCommand("i", { taskId: "t1-a", command: "true", key: "a b" })],
    ["env name", () => e.startCommand("i", { taskId: "t1-a", command: "x", env: { "1X": "" } })],
    ["run", () => e.launch("i", { taskId: "t1-a", run: 0, kind: "agent", script: "" })],
    [
      "file",
      () =>
        e.launch("i", {
          taskId: "t1-a",
          run: 1,
          kind: "agent",
          script: "",
          files: { "exit-1": "0" },
        }),
    ],
    [
      "file path",
      () =>
        e.launch("i", { taskId: "t1-a", run: 1, kind: "agent", script: "", files: { "../x": "" } }),
    ],
    ["probe id", () => e.probe("i", ["ok-1", "../etc"])],
    ["cancel id", () => e.cancel("i", ["t1-a b"])],
    ["tail size", () => e.status("i", "t1-a", { tailBytes: NaN })],
  ];
  for (const [what, call] of bad) await assert.rejects(call(), code("invalid"), what);
  assert.equal(g.calls.length, 0);
  assert.throws(() => createTaskEngine({ incus: g.incus, user: "root;x" }), code("invalid"));
});

Deno.test("startCommand maps a taken id to already_exists and other failures to operation_failed", async () => {
  const taken = createTaskEngine({ incus: guest(17, "isx: task t1-a already exists\n").incus });
  await assert.rejects(
    taken.startCommand("web", { taskId: "t1-a", command: "true" }),
    (e: unknown) =>
      code("already_exists")(e) && /task t1-a already exists in "web"/.test(String(e)),
  );
  const broken = createTaskEngine({
    incus: guest(1, "Failed to start transient service unit\n").incus,
  });
  await assert.rejects(
    broken.startCommand("web", { taskId: "t1-a", command: "true" }),
    (e: unknown) =>
      code("operation_failed")(e) &&
      /launch task t1-a in "web": exit 1: Failed to start transient service unit/.test(String(e)),
  );
});

Deno.test("the engine passes ids and values as argv after the user, never in the script", async () => {
  const g = guest(0, "", "t1-a 1 - active - -\n");
  const e = createTaskEngine({ incus: g.incus, user: "dev" });
  assert.deepEqual([...await e.probe("i", ["t1-a", "t2-b"])], [["t1-a", "running"], [
    "t2-b",
    "unknown",
  ]]);
  await e.startCommand("i", { taskId: "t3-c", command: "echo $(id)", key: "k.1" });
  const [probe, launch] = g.calls;
  assert.deepEqual(probe!.slice(0, 2), ["bash", "-c"]);
  assert.deepEqual(probe!.slice(3), ["isx", "dev", "t1-a", "t2-b"]);
  assert.deepEqual(launch!.slice(3, 9), ["isx", "dev", "t3-c", "1", "command", "k.1"]);
  assert.ok(!launch![2]!.includes("echo $(id)"));
  const script = new TextDecoder().decode(
    Uint8Array.from(atob(launch![9]!), (c) => c.charCodeAt(0)),
  );
  assert.match(script, /bash -c 'echo \$\(id\)'/);
});

Deno.test("launch maps the guest's busy-agent refusal (exit 16) to agent_busy data", async () => {
  const busy = createTaskEngine({ incus: guest(16, "isx: agent task t1-zz is running\n").incus });
  await assert.rejects(
    busy.launch("web", { taskId: "t2-a", run: 1, kind: "agent", script: "" }),
    (e: unknown) =>
      code("operation_failed")(e) && (e as IsbError).data?.agent_busy === "t1-zz" &&
      /agent task t1-zz is running there/.test(String(e)),
  );
  // an exit 16 without the guest's line is an ordinary failure (no task id is made up)
  const odd = createTaskEngine({ incus: guest(16, "something else\n").incus });
  await assert.rejects(
    odd.launch("web", { taskId: "t2-a", run: 1, kind: "agent", script: "" }),
    (e: unknown) => code("operation_failed")(e) && (e as IsbError).data === undefined,
  );
});
