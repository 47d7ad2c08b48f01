/**
 * Lifecycle: the engine's operations on sandboxes, each under the sandbox's lock. Spec-taking
 * calls run resolve → lock → plan → apply → readiness; name-taking calls start, stop, wait
 * for readiness or change one device. This is the top of the engine below compose: it uses
 * every other concern folder.
 *
 * - `sandbox_ops.ts`: create, ensure, plan, remove, and the engine's shared {@link Runtime}
 * - `_lifecycle_ops.ts`: start, stop, wait_ready, add_port, remove_device
 * - `_lock.ts`: the per-sandbox `flock(2)` shared with the isb CLI (§9.3)
 *
 * @module
 */

export {
  type CallOptions,
  clientFor,
  createSandbox,
  ensureSandbox,
  planDesired,
  removeSandbox,
  resolveSpec,
  type Runtime,
  type SpecParams,
} from "./sandbox_ops.ts";
export {
  addPort,
  removeDevice,
  startSandbox,
  stopSandbox,
  waitSandboxReady,
} from "./_lifecycle_ops.ts";
export { type Clock, LOCK_WAIT_MS, SYSTEM_CLOCK } from "./_lock.ts";
