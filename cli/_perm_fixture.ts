/**
 * The permission tests' shared fixture: one fixed context (a user with HOME /home/tester in
 * /srv/project) and the translation of a grant set into `Deno.test`'s `permissions`, so a
 * test can run under exactly what a mode's table row gives. Test code only.
 *
 * @module
 */

import { contextFrom, type Grants, type PermContext } from "./permissions.ts";

/** The fixture user's home. */
export const HOME = "/home/tester";

/** The fixed context the permission tests evaluate the table in. */
export const CTX: PermContext = contextFrom(
  (k) => ({ HOME, XDG_RUNTIME_DIR: "" } as Record<string, string>)[k],
  {
    cwd: "/srv/project",
    uid: 1000,
    programDir: "/opt/isx",
    execPath: "/usr/bin/deno",
    socket: "/var/lib/incus/unix.socket",
  },
);

/** A grant set as `Deno.test`'s `permissions` option. */
export function asTestPermissions(g: Grants): Deno.PermissionOptionsObject {
  return {
    read: g.read,
    write: g.write,
    net: g.net === true ? true : g.net,
    env: g.env === true ? true : g.env,
    run: g.run,
    sys: g.sys as NonNullable<Deno.SysPermissionDescriptor["kind"]>[],
    ffi: false,
    import: false,
  };
}
