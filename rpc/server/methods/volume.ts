/**
 * `volume.list|get|create|remove` and `prune` (shared/spec/isb-rpc.md §5.6, §5.7): strict
 * params forwarded to the engine. `volume.get` accepts and ignores `config`, as isb does
 * (its params struct is shared with `volume.create`); `prune` is a dry run unless told.
 *
 * @module
 */

import * as z from "zod";
import type { Engine } from "../../sandbox/mod.ts";
import { StringMap } from "../../sandbox/spec/scalars.ts";
import { type Handler, method } from "../dispatch.ts";
import { callOptions } from "./sandbox.ts";

const project = z.string().optional();

const VolumeParams = z.strictObject({
  name: z.string(),
  pool: z.string().optional(),
  config: StringMap.optional(),
  project,
});

/** The volume group's handlers (and `prune`). */
export const volumeMethods: Record<string, Handler<Engine>> = {
  "volume.list": method(
    z.strictObject({ pool: z.string().optional(), project }),
    (p, ctx) => ctx.engine.volumeList({ pool: p.pool }, { project: p.project }),
  ),
  "volume.get": method(
    VolumeParams,
    (p, ctx) => ctx.engine.volumeGet({ name: p.name, pool: p.pool }, { project: p.project }),
  ),
  "volume.create": method(
    VolumeParams,
    (p, ctx) =>
      ctx.engine.volumeCreate({ name: p.name, pool: p.pool, config: p.config ?? {} }, {
        project: p.project,
      }),
  ),
  "volume.remove": method(VolumeParams, async (p, ctx) => {
    await ctx.engine.volumeRemove({ name: p.name, pool: p.pool }, { project: p.project });
    return null;
  }),
  prune: method(
    z.strictObject({ label: z.string(), dry_run: z.boolean().optional(), project }),
    (p, ctx) =>
      ctx.engine.prune({ label: p.label, dry_run: p.dry_run ?? true }, callOptions(p, ctx)),
  ),
};
