/**
 * The patterns of definitions that the instance commands and the chain resolver need
 * without the schemas: names and parameter values, and a script field as a list. A leaf, so
 * `isx branch|start|stop|destroy` start without zod (issue 24: the schemas are loaded when
 * the definitions are, after the command's first requests are on their way).
 * `schema.ts` re-exports them.
 *
 * @module
 */

/** Template, tool and instance names: what an Incus instance name allows, kept short. */
export const NAME_RE = /^[a-z]([a-z0-9-]{0,46}[a-z0-9])?$/;
/** A parameter value (e.g. a model id): the spec's model pattern. */
export const PARAM_VALUE_RE = /^[A-Za-z0-9][A-Za-z0-9._:@/\[\]-]{0,119}$/;

/** A script field as a list of scripts. */
export function scripts(s: string | string[] | undefined): string[] {
  return s === undefined ? [] : Array.isArray(s) ? s : [s];
}
