/**
 * `sandbox.exec` and `exec.*` through a real `isb rpc` process against the real Incus: one
 * container, launched directly with the Incus client, reused by every step and deleted at
 * the end. Nothing here sleeps to wait for a state: streaming and parallelism are proved by
 * ordering (the test answers the first chunk before the command may finish; eight execs
 * meet at a barrier inside the guest).
 */

import assert from "node:assert/strict";
import {
  LIVE_ARGS,
  LIVE_IMAGE,
  liveIncus,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";
import { b64, type Reply, RpcClient, streamText, unb64 } from "../helpers/rpc_client.ts";

const text = (s: unknown) => new TextDecoder().decode(unb64(String(s)));

/** Resolves when `reply` has seen a `stream` event containing `needle`. */
function waitOutput(onEvent: (fn: (e: string, d: unknown) => void) => void, needle: string) {
  let seen = "";
  return new Promise<void>((resolve) => {
    onEvent((event, data) => {
      if (event !== "stdout") return;
      seen += text(data);
      if (seen.includes(needle)) resolve();
    });
  });
}

/** A call whose events can be awaited while it runs. */
function streaming(rpc: RpcClient, params: Record<string, unknown>) {
  const listeners: ((e: string, d: unknown) => void)[] = [];
  const id = rpc.nextId();
  const done = rpc.call("sandbox.exec", { stream: true, ...params }, {
    id,
    onEvent: (e, d) => listeners.forEach((l) => l(e, d)),
  });
  return { id, done, output: (needle: string) => waitOutput((l) => listeners.push(l), needle) };
}

Deno.test({
  name: "sandbox.exec drives a real container through isb rpc",
  ignore: NO_INCUS,
  async fn(t) {
    const name = testName("rpcexec");
    const incus = liveIncus();
    try {
      await incus.createInstance({
        name,
        type: "container",
        source: { type: "image", alias: LIVE_IMAGE },
        start: true,
      }, { step: `create instance ${name}` });
      await using rpc = await RpcClient.start([...LIVE_ARGS]);
      const exec = (params: Record<string, unknown>) =>
        rpc.call("sandbox.exec", { name, ...params });

      await t.step("16 KiB of binary stdin reaches the guest intact", async () => {
        const data = crypto.getRandomValues(new Uint8Array(16 * 1024));
        const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
        const hex = [...hash].map((b) => b.toString(16).padStart(2, "0")).join("");
        const r = await exec({ argv: ["sha256sum"], stdin: { data: b64(data) } });
        assert.equal((r.result as { exit_code: number }).exit_code, 0);
        assert.equal(text((r.result as { stdout: string }).stdout).split(" ")[0], hex);
      });

      await t.step(
        "a buffered exec past 32 MiB is killed and refused; streamed it passes",
        async () => {
          // `yes` never ends by itself: only the kill at the limit ends it
          const r = await exec({ argv: ["yes", "0123456789abcdef"] });
          const err = r.error as { code: string; message: string };
          assert.equal(err?.code, "invalid", JSON.stringify(r).slice(0, 300));
          assert.match(err.message, /more than 32 MiB of output.*"stream": true/);
          const s = await exec({ argv: ["head", "-c", "40000000", "/dev/zero"], stream: true });
          assert.deepEqual(s.result, { exit_code: 0 });
        },
      );

      await t.step("the first streamed chunk arrives before the command exits", async () => {
        const s = streaming(rpc, {
          name,
          argv: ["sh", "-c", "echo first; read go; echo second"],
          stdin: "piped",
        });
        await s.output("first"); // the command is blocked on `read` until we answer
        await rpc.ok("exec.write", { exec: s.id, data: b64("go\n") });
        const r = await s.done;
        assert.deepEqual(r.result, { exit_code: 0 });
        assert.equal(streamText(r), "first\nsecond\n");
      });

      await t.step("8 concurrent streaming execs run in parallel", async () => {
        // not under /tmp: systemd-tmpfiles empties it while a fresh container still boots
        const dir = `/root/barrier-${crypto.randomUUID()}`;
        const made = await exec({ argv: ["mkdir", dir] });
        assert.equal((made.result as { exit_code?: number })?.exit_code, 0, JSON.stringify(made));
        const script = `touch ${dir}/$0; i=0; while [ $(ls ${dir} | wc -l) -lt 8 ]; do ` +
          `i=$((i+1)); [ $i -gt 300 ] && exit 9; sleep 0.1; done; echo met $0`;
        const runs = Array.from(
          { length: 8 },
          (_, i) =>
            rpc.call("sandbox.exec", { name, argv: ["sh", "-c", script, `p${i}`], stream: true }),
        );
        const all = await Promise.all(runs);
        all.forEach((r, i) => {
          assert.deepEqual(r.result, { exit_code: 0 }, JSON.stringify(r));
          assert.equal(streamText(r), `met p${i}\n`);
        });
      });

      await t.step("exec.signal delivers SIGTERM to a trap", async () => {
        const s = streaming(rpc, {
          name,
          argv: [
            "sh",
            "-c",
            'trap "echo got-term; exit 42" TERM; echo ready; while :; do sleep 0.1; done',
          ],
        });
        await s.output("ready");
        await rpc.ok("exec.signal", { exec: s.id, signal: 15 });
        const r = await s.done;
        assert.deepEqual(r.result, { exit_code: 42 });
        assert.match(streamText(r), /got-term/);
      });

      await t.step("piped stdin takes exec.write and exec.close_stdin", async () => {
        const id = rpc.nextId();
        const done = rpc.call("sandbox.exec", {
          name,
          argv: ["cat"],
          stdin: "piped",
          stream: true,
        }, { id });
        const [w1, w2, c] = await Promise.all([
          rpc.call("exec.write", { exec: id, data: b64("hello ") }),
          rpc.call("exec.write", { exec: id, data: b64("world\n") }),
          rpc.call("exec.close_stdin", { exec: id }),
        ]);
        assert.deepEqual([w1.result, w2.result, c.result], [null, null, null]);
        const r = await done;
        assert.deepEqual(r.result, { exit_code: 0 });
        assert.equal(streamText(r), "hello world\n");
        const after = await rpc.call("exec.write", { exec: id, data: b64("x") });
        assert.equal(after.error?.code, "not_found");
      });

      await t.step("a tty has the requested size and follows exec.resize", async () => {
        const s = streaming(rpc, {
          name,
          argv: [
            "sh",
            "-c",
            'stty size; while read x; do s=$(stty size); echo "size $s"; ' +
            '[ "$s" = "40 120" ] && break; done; echo TERM=$TERM',
          ],
          tty: true,
          width: 100,
          height: 30,
          stdin: "piped",
        });
        await s.output("30 100");
        await rpc.ok("exec.resize", { exec: s.id, width: 120, height: 40 });
        // the resize travels on Incus's control websocket and the newline on stdin's: over a
        // remote (HTTPS) the newline may reach the guest first, so ask again until it shows
        const sized = s.output("size 40 120").then(() => true);
        let shown = false;
        for (let i = 0; i < 20 && !shown; i++) {
          await rpc.ok("exec.write", { exec: s.id, data: b64("\n") });
          let timer: ReturnType<typeof setTimeout> | undefined;
          const later = new Promise<false>((r) => timer = setTimeout(r, 500, false));
          shown = await Promise.race([sized, later]);
          clearTimeout(timer);
        }
        assert.ok(shown, "the tty never reported the new size 40 120");
        const r = await s.done;
        assert.deepEqual(r.result, { exit_code: 0 });
        assert.match(streamText(r), /size 40 120/);
        assert.match(streamText(r), /TERM=\S+/);
        assert.equal(r.events.filter((e) => e.event === "stderr").length, 0);
      });

      await t.step("timeout kills the command and answers exec_timeout", async () => {
        const r = await exec({ argv: ["sleep", "30"], timeout: "1" });
        assert.equal(r.error?.code, "exec_timeout");
        assert.equal(r.error?.message, "exec sleep 30 timed out after 1s (killed)");
        assert.deepEqual(r.error?.data, { timeout_secs: 1 });
      });

      await t.step("user, cwd, env and login shape the command", async () => {
        await exec({
          argv: [
            "sh",
            "-c",
            "useradd -m -s /bin/bash tester && " +
            "echo 'export ISB_LOGIN=yes' > /etc/profile.d/isbtest.sh",
          ],
        });
        const script = 'echo "$(id -u):$(id -g) $(pwd) $HOME $USER $LOGNAME $FOO ${ISB_LOGIN:-no}"';
        const plain = await exec({
          argv: ["sh", "-c", script],
          user: "tester",
          env: { FOO: "bar" },
        });
        const out = (r: Reply) => text((r.result as { stdout: string }).stdout).trim();
        const uid = out(await exec({ argv: ["id", "-u", "tester"] }));
        assert.equal(out(plain), `${uid}:${uid} /home/tester /home/tester tester tester bar no`);
        const login = await exec({
          argv: ["sh", "-c", script],
          defaults: { user: "tester", cwd: "/tmp", env: { FOO: "def" }, login: true },
          env: { FOO: "call" },
        });
        assert.equal(out(login), `${uid}:${uid} /tmp /home/tester tester tester call yes`);
        const numeric = await exec({ argv: ["sh", "-c", "id -u; id -g; pwd"], user: "4321:77" });
        assert.equal(out(numeric), "4321\n77\n/", "no passwd entry: Incus picks /");
        const ghost = await exec({ argv: ["true"], user: "ghost" });
        assert.deepEqual(ghost.error, {
          code: "invalid",
          message: `no such user ghost in ${name}`,
        });
        const missing = await rpc.call("sandbox.exec", { name: `${name}-x`, argv: ["true"] });
        assert.equal(missing.error?.code, "not_found");
      });

      await t.step(
        "closing the server's stdin lets a running exec finish, then exit 0",
        async () => {
          const flag = `/tmp/go-${crypto.randomUUID()}`;
          const other = await RpcClient.start([...LIVE_ARGS]);
          try {
            const s = streaming(other, {
              name,
              argv: [
                "sh",
                "-c",
                `echo one; i=0; while [ ! -e ${flag} ] && [ $i -lt 600 ]; do i=$((i+1)); sleep 0.1; done; echo two`,
              ],
            });
            await s.output("one");
            await other.program.closeStdin(); // EOF while the exec runs
            await exec({ argv: ["touch", flag] }); // through the first server
            const r = await s.done;
            assert.deepEqual(r.result, { exit_code: 0 });
            assert.equal(streamText(r), "one\ntwo\n");
            assert.equal((await other.program.wait()).code, 0);
            assert.deepEqual(other.junk, []);
          } finally {
            await other[Symbol.asyncDispose]();
          }
        },
      );

      assert.deepEqual(rpc.junk, [], "every stdout line is JSON");
    } finally {
      await removeInstance(incus, name);
      incus.close();
    }
  },
});
