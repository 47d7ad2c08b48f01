/**
 * Counts the execs Incus runs in one instance, whoever asks for them: `incus monitor` over
 * the daemon's event stream (operations), so a bench can show how many execs a call through
 * another process (`isx mcp`) cost, without wrapping that process's client.
 *
 * @module
 */

/** A running count of `Executing command` operations in `instance`. */
export interface ExecCounter extends AsyncDisposable {
  /** Execs seen so far. */
  count(): number;
  /** Waits until the count has been still for `quietMs` (events arrive shortly after). */
  settle(quietMs?: number): Promise<number>;
}

/** Starts counting the execs in `instance`; resolves once the event stream is open. */
export async function countExecs(instance: string): Promise<ExecCounter> {
  const child = new Deno.Command("incus", {
    args: ["monitor", "--type=operation", "--format=json"],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const seen = new Set<string>();
  let last = performance.now();
  const dec = new TextDecoder();
  let buf = "";
  const reading = (async () => {
    for await (const chunk of child.stdout) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (!line) continue;
        const m = JSON.parse(line).metadata ?? {};
        const mine = (m.resources?.instances ?? []).some((r: string) =>
          r === `/1.0/instances/${instance}`
        );
        if (mine && m.description === "Executing command" && !seen.has(m.id)) {
          seen.add(m.id);
          last = performance.now();
        }
      }
    }
  })();
  // the monitor prints nothing until an event: it listens once it has seen an exec of ours
  for (let i = 0; seen.size === 0; i++) {
    if (i === 20) throw new Error(`incus monitor saw no exec in "${instance}"`);
    await new Deno.Command("incus", { args: ["exec", instance, "--", "true"] }).output();
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 300));
  const base = seen.size;
  return {
    count: () => seen.size - base,
    async settle(quietMs = 300) {
      while (performance.now() - last < quietMs) await new Promise((r) => setTimeout(r, 50));
      return seen.size - base;
    },
    async [Symbol.asyncDispose]() {
      child.kill("SIGTERM");
      await child.status;
      await reading.catch(() => {});
    },
  };
}
