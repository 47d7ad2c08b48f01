/**
 * Templates: YAML definitions in layers (built-in, user, search paths, project-local),
 * validated strictly, resolved into parent chains with their tools, and built into stopped
 * Incus instances stamped with what they were built from. See docs/templates.md.
 *
 * @module
 */

export * from "./schema.ts";
export * from "./load.ts";
export * from "./resolve.ts";
export * from "./steps.ts";
export * from "./plan.ts";
export * from "./cache.ts";
export * from "./program.ts";
export * from "./build.ts";
export * from "./proxy_rules.ts";
export { BUILTIN_TEMPLATES, BUILTIN_TOOLS } from "./builtin.ts";
