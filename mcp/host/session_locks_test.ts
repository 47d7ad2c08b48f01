import assert from "node:assert/strict";
import { newSessionId, SessionLocks } from "./session_locks.ts";

const HOLDER = new URL("../../tests/helpers/session_holder.ts", import.meta.url).pathname;

/** A real process that takes session `id`'s lock under `dir`, and says so. */
async function holder(dir: string, id: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", `--allow-read=${dir}`, `--allow-write=${dir}`, HOLDER, dir, id],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  assert.equal(new TextDecoder().decode(value).trim(), "locked");
  reader.releaseLock();
  return child;
}

Deno.test("SessionLocks: a session of another process is alive while it runs and dead the moment it is killed", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const me = new SessionLocks(`${dir}/sessions`);
    const id = newSessionId(4242, 1_700_000_000_000);
    const child = await holder(`${dir}/sessions`, id);
    assert.equal(me.alive(id), true);
    assert.equal(me.alive(id), true, "asking does not take the lock");
    child.kill("SIGKILL");
    const st = await child.status;
    assert.equal(st.signal, "SIGKILL");
    await child.stdout.cancel();
    assert.equal(me.alive(id), false, "no wait: the kernel dropped the lock at death");
    assert.throws(() => Deno.statSync(`${dir}/sessions/${id}`), Deno.errors.NotFound);
    assert.equal(me.alive(id), false);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("SessionLocks: own session, a clean stop, missing and junk ids; start clears killed sessions' files", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const a = new SessionLocks(`${dir}/sessions`);
    const b = new SessionLocks(`${dir}/sessions`);
    const id = newSessionId(1, 2);
    // a killed session's leftover: a file nobody locks
    Deno.mkdirSync(`${dir}/sessions`);
    Deno.writeTextFileSync(`${dir}/sessions/9-9`, "9-9\n");
    a.start(id);
    assert.throws(() => Deno.statSync(`${dir}/sessions/9-9`), Deno.errors.NotFound);
    assert.equal(a.alive(id), true);
    assert.equal(b.alive(id), true, "a second open file in the same process sees the lock too");
    assert.equal(b.alive("1-3"), false);
    assert.equal(b.alive("../etc/passwd"), false);
    assert.equal(b.alive(""), false);
    assert.throws(() => b.start("../x"), TypeError);
    assert.equal(Deno.statSync(`${dir}/sessions/${id}`).mode! & 0o777, 0o600);
    a.stop();
    assert.equal(b.alive(id), false);
    assert.throws(() => Deno.statSync(`${dir}/sessions/${id}`), Deno.errors.NotFound);
    a.stop(); // twice is harmless
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test({
  name:
    "SessionLocks: a session file this process may not open counts as alive (nothing taken on a guess)",
  permissions: { read: false, write: false },
  fn() {
    assert.equal(new SessionLocks("/nonexistent/isx/sessions").alive("5-5"), true);
  },
});
