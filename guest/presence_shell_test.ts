import assert from "node:assert/strict";
import { attachedPids, parsePresence } from "../mcp/tasks/presence.ts";
import { PRESENCE_FNS } from "./presence_shell.ts";
import { PRELUDE, QUIET_SH } from "./task_shell.ts";

const S1 = "0f0f0f0f-1111-2222-3333-444444444444";
const S4 = "0f0f0f0f-4444-2222-3333-444444444444";
const S5 = "0f0f0f0f-5555-2222-3333-444444444444";
const OC = "ses_abcdefgh12";

/** A real process whose argv0 is `argv0` (bash's `exec -a`), with its environment and cwd. */
function fake(argv0: string, cmd: string[], o: { cwd: string; env?: Record<string, string> }) {
  return new Deno.Command("bash", {
    args: ["-c", 'exec -a "$0" "$@"', argv0, ...cmd],
    cwd: o.cwd,
    clearEnv: true,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", ...o.env },
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
}

Deno.test("the presence scan reads real agent-shaped processes and a held join lock", async () => {
  const dir = await Deno.makeTempDir({ prefix: "isx-presence-" });
  const root = `${dir}/tasks`;
  const task = async (id: string, agent: string, session: string) => {
    await Deno.mkdir(`${root}/${id}`, { recursive: true });
    await Deno.mkdir(`${dir}/${id}`);
    await Deno.writeTextFile(`${root}/${id}/agent`, `${agent}\n`);
    await Deno.writeTextFile(`${root}/${id}/session_id`, `${session}\n`);
    await Deno.writeTextFile(`${root}/${id}/cwd`, `${dir}/${id}\n`);
  };
  await task("t1-aaaa", "claude", S1);
  await task("t2-aaaa", "pi", "01a231e7-a8fb-7000-8000-000000000000");
  await task("t3-aaaa", "opencode", OC);
  await task("t4-aaaa", "codex", S4);
  await task("t5-aaaa", "claude", S5);
  const piScript = `${dir}/pi-coding-agent/dist/cli.js`;
  await Deno.mkdir(`${dir}/pi-coding-agent/dist`, { recursive: true });
  await Deno.writeTextFile(piScript, "");
  await Deno.writeTextFile(`${root}/t5-aaaa/join.lock`, "");
  const keep = ["bash", "-c", "sleep 60; :"];
  const marked = fake("claude", [...keep, "--resume", S1], {
    cwd: `${dir}/t1-aaaa`,
    env: { ISX_MCP_TASK: "t1-aaaa" },
  });
  const claude = fake("claude", [...keep, "--resume", S1], { cwd: "/" });
  const piRenamed = fake("pi", ["sleep", "60"], { cwd: "/" }); // arguments gone, cwd elsewhere
  const piNode = fake("node", ["tail", piScript, "-f"], { cwd: `${dir}/t2-aaaa` });
  const opencode = fake("opencode", [...keep, "-s", OC], { cwd: "/" });
  // the daemon first: an older pid in the task's cwd, which must still not count
  const daemon = fake("codex", [...keep, "app-server", "--listen", "unix://"], {
    cwd: `${dir}/t4-aaaa`,
  });
  const codex = fake(`${dir}/vendor/codex`, [...keep, "resume", S4], { cwd: "/" });
  const lock = new Deno.Command("flock", {
    args: [`${root}/t5-aaaa/join.lock`, "sleep", "60"],
    stdin: "null",
  }).spawn();
  const all = [marked, claude, piRenamed, piNode, opencode, codex, daemon, lock];
  try {
    await Deno.writeTextFile(`${root}/t5-aaaa/join.pid`, `${lock.pid}\n`);
    await new Promise((r) => setTimeout(r, 500)); // every exec -a done, the lock taken
    const user = new TextDecoder().decode(
      (await new Deno.Command("id", { args: ["-un"], stdout: "piped" }).output()).stdout,
    ).trim();
    const ids = ["t1-aaaa", "t2-aaaa", "t3-aaaa", "t4-aaaa", "t5-aaaa"];
    const out = await new Deno.Command("bash", {
      args: ["-c", PRELUDE + PRESENCE_FNS + 'root=$R; presence "$@"', "isx", user, ...ids],
      env: { R: root },
      stdout: "piped",
    }).output();
    assert.ok(out.success);
    const scan = parsePresence(new TextDecoder().decode(out.stdout));
    assert.equal(scan.tasks.length, 5);
    assert.deepEqual(Object.fromEntries(attachedPids(scan)), {
      "t1-aaaa": claude.pid,
      "t2-aaaa": piNode.pid,
      "t3-aaaa": opencode.pid,
      "t4-aaaa": codex.pid,
      "t5-aaaa": lock.pid,
    });
    const seen = new Map(scan.procs.map((p) => [p.pid, p]));
    assert.equal(seen.get(marked.pid)?.mark, "t1-aaaa", "the marker is read");
    assert.deepEqual(seen.get(piRenamed.pid)?.argv, ["pi", "60"]);
    assert.ok(seen.has(daemon.pid), "the daemon is a candidate the host then rules out");
  } finally {
    for (const p of all) {
      try {
        p.kill("SIGKILL");
      } catch { /* already gone */ }
      await p.status;
    }
    await Deno.remove(dir, { recursive: true });
  }
});

const IS_ROOT = Deno.uid() === 0;
if (!IS_ROOT) {
  // deno-lint-ignore no-console
  console.error("the dormancy probe's presence test needs root (a PID namespace of its own)");
}

Deno.test({
  name: "the dormancy probe counts a person's agent and a held join lock as presence",
  ignore: !IS_ROOT,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "isx-quiet-" });
    try {
      const t = `${dir}/tasks/t1-aaaa`;
      await Deno.mkdir(t, { recursive: true });
      await Deno.writeTextFile(`${t}/kind`, "agent\n");
      await Deno.writeTextFile(`${t}/join.lock`, "");
      // the probe, its task root moved to the test's directory
      const quiet = QUIET_SH.replace(PRESENCE_FNS, `${PRESENCE_FNS}\nroot=$R\n`);
      assert.notEqual(quiet, QUIET_SH);
      // in a PID namespace of its own, /proc shows only what the case starts: no terminal
      const run = async (setup: string) => {
        const o = await new Deno.Command("unshare", {
          args: [
            "--pid",
            "--fork",
            "--mount-proc",
            "bash",
            "-c",
            `${setup}\nsleep 0.3\nbash -c "$Q" isx root`,
          ],
          env: { Q: quiet, R: `${dir}/tasks` },
          stdin: "null",
          stdout: "piped",
          stderr: "piped",
        }).output();
        const out = new TextDecoder().decode(o.stdout);
        assert.ok(o.success, new TextDecoder().decode(o.stderr));
        return out.split("\n")[0];
      };
      assert.equal(await run(":"), "present 0", "nobody");
      assert.equal(
        await run("(exec -a claude sleep 5) &"),
        "present 1",
        "a person's Claude Code, no terminal",
      );
      assert.equal(
        await run("(export ISX_MCP_TASK=t1-aaaa; exec -a claude sleep 5) &"),
        "present 0",
        "a delegated run is no person",
      );
      assert.equal(
        await run(`flock ${dir}/tasks/t1-aaaa/join.lock sleep 5 &`),
        "present 1",
        "a held join lock",
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
