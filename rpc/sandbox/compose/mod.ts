/**
 * Compose: `compose.load|up|plan|down` (isb-rpc.md §5.8, §12) over compose files. Loading
 * is reading, interpolating, merging and validating the files into one project; the
 * operations walk its services in dependency order through the lifecycle operations.
 *
 * - `load.ts`: files → project (with `_document.ts`, `_interpolate.ts`, `_merge.ts`,
 *   `_envfile.ts`, `_validate.ts`, `_names.ts`); `fs.ts`: the injected file access, refusing
 *   protected paths
 * - `ops.ts`: load, up, plan, down
 * - `extras.ts`: the compose-only steps of up (secrets, supervised commands, healthchecks);
 *   `_unit_values.ts`: the guest paths and unit values they write, checked first
 *
 * @module
 */

export { composeDown, composeLoad, type ComposeParams, composePlan, composeUp } from "./ops.ts";
export { type ComposeFs, DENO_FS, protectFs } from "./fs.ts";
export type { ComposeLoadResult } from "./load.ts";
