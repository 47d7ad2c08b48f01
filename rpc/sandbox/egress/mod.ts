/**
 * Egress: the Incus side of a sandbox's egress policy (isb-rpc.md §13). The names, config
 * keys, NIC and ACL body are pure data (`names.ts`, used by resolution); the rest prepares
 * and tears down the bridge, its ACL and the interception CA around `apply`.
 *
 * - `names.ts`: bridge/ACL names, placeholders, config keys, the {@link EgressPlan} (pure)
 * - `egress.ts`: before apply (bridge, ACL, secrets), after ready (CA trust), teardown
 * - `_bridge.ts`: creating the per-sandbox bridge race-safely; `_ca.ts`: the CA and its push
 *
 * @module
 */

export { type EgressPlan, egressPlan } from "./names.ts";
