/**
 * Planning and applying: {@link Desired} against the instance Incus holds → the actions
 * that bring it there (pure, table-tested), and those actions as Incus calls in plan order.
 *
 * - `plan.ts`: the reconcile rules (isb-rpc.md §9.1); `_actions.ts`: the action and plan types
 * - `apply.ts`: actions → Incus calls, batched If-Match device updates, cleanup of a
 *   half-made create (§9.2); `_owner.ts`: owner fixups of mount points (§9.4)
 * - `ports.ts`: host ports searched at apply time (§9.5)
 *
 * @module
 */

export type { Action, ApplyReport, Props, SandboxPlan } from "./plan.ts";
export { plan, type PlanOptions } from "./plan.ts";
