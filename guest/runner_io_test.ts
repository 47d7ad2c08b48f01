import assert from "node:assert/strict";
import {
  cancelling,
  EventLog,
  onCancel,
  readRegular,
  runFiles,
  signalExit,
  writeAside,
  writeExit,
  writeSessionOnce,
} from "./runner_io.ts";

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("readRegular refuses a FIFO without blocking", () =>
  withDir(async (dir) => {
    const r = await new Deno.Command("mkfifo", { args: [`${dir}/prompt-1.md`] }).output();
    assert.equal(r.code, 0);
    await assert.rejects(readRegular(`${dir}/prompt-1.md`), /not a regular file/);
    assert.equal(await readRegular(`${dir}/absent`), undefined);
    await Deno.writeTextFile(`${dir}/p`, "0123456789");
    assert.equal(await readRegular(`${dir}/p`, 4), "0123");
  }));

Deno.test("writeExit writes once: the first exit wins and no temp file stays", () =>
  withDir(async (dir) => {
    const f = runFiles(dir, 2);
    assert.equal(await writeExit(f, 143), true);
    assert.equal(await writeExit(f, 0), false);
    assert.equal(await Deno.readTextFile(f.exit), "143\n");
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["exit-2"]);
    await assert.rejects(writeExit(f, 256), /0-255/);
  }));

Deno.test("writeAside replaces a file whole", () =>
  withDir(async (dir) => {
    await writeAside(`${dir}/cwd`, "/a\n");
    await writeAside(`${dir}/cwd`, "/b\n");
    assert.equal(await Deno.readTextFile(`${dir}/cwd`), "/b\n");
    assert.equal([...Deno.readDirSync(dir)].length, 1);
  }));

Deno.test("writeSessionOnce keeps the first session and refuses odd ids", () =>
  withDir(async (dir) => {
    const f = runFiles(dir, 1);
    assert.equal(await writeSessionOnce(f, "3f1c-aa"), true);
    assert.equal(await writeSessionOnce(f, "other"), false);
    assert.equal(await Deno.readTextFile(f.session), "3f1c-aa\n");
    await assert.rejects(writeSessionOnce(f, "--resume=x"), /unexpected/);
    await assert.rejects(writeSessionOnce(f, "a b"), /unexpected/);
  }));

Deno.test("EventLog appends whole JSON lines across opens", () =>
  withDir(async (dir) => {
    const f = runFiles(dir, 1);
    for (const batch of [[{ type: "a" }], [], [{ type: "b" }, { type: "c", n: 1 }]]) {
      const log = await EventLog.open(f.events);
      await log.append(batch);
      log.close();
    }
    const lines = (await Deno.readTextFile(f.events)).trimEnd().split("\n").map((l) =>
      JSON.parse(l)
    );
    assert.deepEqual(lines, [{ type: "a" }, { type: "b" }, { type: "c", n: 1 }]);
  }));

Deno.test("cancelling reads only a digits stamp; signalExit gives the shell's codes", () =>
  withDir(async (dir) => {
    const f = runFiles(dir, 1);
    assert.equal(await cancelling(f), false);
    await Deno.writeTextFile(f.cancelling, "1796135608\n");
    assert.equal(await cancelling(f), true);
    await Deno.writeTextFile(f.cancelling, "soon");
    assert.equal(await cancelling(f), false);
    assert.equal(signalExit("SIGTERM"), 143);
    assert.equal(signalExit("SIGINT"), 130);
    assert.throws(() => runFiles("rel", 1), /absolute/);
  }));

Deno.test("onCancel calls its handler once for the first cancel signal", async () => {
  const seen: string[] = [];
  let told = () => {};
  const got = new Promise<void>((r) => told = r);
  const off = onCancel((sig) => {
    seen.push(sig);
    told();
  });
  const alive = setTimeout(() => {}, 5000); // signal listeners do not keep the loop alive
  try {
    Deno.kill(Deno.pid, "SIGTERM");
    await got;
    Deno.kill(Deno.pid, "SIGHUP");
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(seen, ["SIGTERM"]);
  } finally {
    clearTimeout(alive);
    off();
  }
});
