import assert from "node:assert/strict";
import { acquireLock, type Clock, lockPath, withLock } from "./_lock.ts";
import { IsbError } from "../../errors.ts";

/** A clock that advances only when slept on. */
function fakeClock(): Clock & { slept: number } {
  let t = 0;
  const c = {
    slept: 0,
    now: () => t,
    sleep: (ms: number) => {
      t += ms;
      c.slept += ms;
      return Promise.resolve();
    },
  };
  return c;
}

Deno.test("lockPath puts the lock under the project, default for the empty one", () => {
  assert.equal(lockPath("/run/isb", { project: "", name: "web" }), "/run/isb/default/web.lock");
  assert.equal(lockPath("/run/isb", { project: "p1", name: "web" }), "/run/isb/p1/web.lock");
});

Deno.test("acquireLock waits for another holder, says so once, then times out as invalid", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const a = await acquireLock({ lockDir: dir, project: "", name: "n" });
    const clock = fakeClock();
    const waits: string[] = [];
    const err = await acquireLock({
      lockDir: dir,
      project: "",
      name: "n",
      waitMs: 1000,
      clock,
      onWait: (p) => waits.push(p),
    }).catch((e) => e);
    assert.ok(err instanceof IsbError);
    assert.equal(err.code, "invalid");
    assert.equal(
      err.message,
      `timed out after 1s waiting for the lock on n (${dir}/default/n.lock) held by another isb`,
    );
    assert.deepEqual(waits, [`${dir}/default/n.lock`]);
    assert.equal(clock.slept, 1000);
    a.release();
    const b = await acquireLock({ lockDir: dir, project: "", name: "n", clock });
    b.release();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("withLock releases the lock when the function throws", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(
      withLock({ lockDir: dir, project: "p", name: "n" }, () => Promise.reject(new TypeError("x"))),
      TypeError,
    );
    const again = await acquireLock({ lockDir: dir, project: "p", name: "n", waitMs: 0 });
    again.release();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

const HAVE_FLOCK = await new Deno.Command("flock", { args: ["--version"], stdout: "null" })
  .output().then((o) => o.success, () => false);

Deno.test({
  name: "acquireLock excludes and is excluded by flock(1), as the isb CLI takes it",
  ignore: !HAVE_FLOCK,
  fn: async () => {
    const dir = await Deno.makeTempDir();
    try {
      const path = lockPath(dir, { project: "", name: "n" });
      const held = await acquireLock({ lockDir: dir, project: "", name: "n" });
      const busy = await new Deno.Command("flock", { args: ["-n", "-x", path, "true"] }).output();
      assert.equal(busy.code, 1, "flock(1) must see our lock");
      held.release();
      const free = await new Deno.Command("flock", { args: ["-n", "-x", path, "true"] }).output();
      assert.equal(free.code, 0);
      // flock(1) holds it while `sleep` runs; we must time out.
      const child = new Deno.Command("flock", { args: ["-x", path, "sleep", "5"] }).spawn();
      try {
        const deadline = Date.now() + 5000;
        let seen = false;
        while (!seen && Date.now() < deadline) {
          const r = await new Deno.Command("flock", { args: ["-n", "-x", path, "true"] }).output();
          seen = r.code === 1;
          if (!seen) await new Promise((r) => setTimeout(r, 20));
        }
        assert.ok(seen, "flock(1) never took the lock");
        const err = await acquireLock({ lockDir: dir, project: "", name: "n", waitMs: 250 })
          .catch((e) => e);
        assert.ok(err instanceof IsbError && err.code === "invalid");
      } finally {
        child.kill("SIGKILL");
        await child.status;
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
