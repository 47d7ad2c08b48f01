import assert from "node:assert/strict";
import { after } from "./timer.ts";

Deno.test("after fires once, after its delay", async () => {
  const t0 = performance.now();
  let n = 0;
  await new Promise<void>((resolve) => after(30, () => (n++, resolve())));
  assert.equal(n, 1);
  assert.ok(performance.now() - t0 >= 25, "not before its delay");
});

Deno.test("a cancelled timer never fires", async () => {
  let fired = false;
  const cancel = after(10, () => (fired = true));
  cancel();
  await new Promise<void>((resolve) => after(40, resolve));
  assert.equal(fired, false);
});

const child = (code: string) =>
  new Deno.Command(Deno.execPath(), {
    args: ["eval", `import { after } from "${new URL("./timer.ts", import.meta.url)}"; ${code}`],
    stdout: "piped",
  }).output();

Deno.test("an armed timer keeps the process alive; a cancelled one does not", async () => {
  const armed = await child(`after(300, () => console.log("fired"));`);
  assert.equal(new TextDecoder().decode(armed.stdout).trim(), "fired");
  const t0 = performance.now();
  const cancelled = await child(`after(5000, () => console.log("fired"))();`);
  assert.equal(new TextDecoder().decode(cancelled.stdout).trim(), "");
  assert.ok(performance.now() - t0 < 4000, "the process did not wait for a cancelled timer");
});
