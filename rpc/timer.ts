/**
 * A one-shot timer on the runtime's own timer (the one `AbortSignal.timeout` uses), for the
 * modules every start reaches. Deno 2.9's global `setTimeout` is Node's (it returns a
 * `Timeout`), and its first call loads Node's timers, `async_hooks`, errors and
 * `util.inspect`: 5–13 ms measured here (a one-line `deno run`), paid before the first Incus call
 * of `isx list`, `isb rpc` and `isx mcp` answered. The timer keeps the process alive while it is
 * armed (Deno refs `AbortSignal.timeout`'s timer while the signal has listeners) and not after
 * it is cancelled (`timer_test.ts`).
 *
 * @module
 */

/** Runs `fn` once after `ms` milliseconds; the returned function cancels it. */
export function after(ms: number, fn: () => void): () => void {
  const signal = AbortSignal.timeout(Math.max(0, Math.floor(ms)));
  const fire = () => fn();
  signal.addEventListener("abort", fire, { once: true });
  return () => signal.removeEventListener("abort", fire);
}
