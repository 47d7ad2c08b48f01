/**
 * The one table of Deno permissions, per mode.
 *
 * A compiled binary carries one set of permission flags, so the process starts with
 * `--no-prompt` and the *union* of every mode's scoped grants; the chosen mode then revokes
 * what it does not need ({@link enterMode}) before it reads any input. The launchers in
 * `bin/`, the `compile` task (`scripts/compile.ts`) and the process tests all derive their
 * flags from {@link unionFlags}, so there is exactly one source.
 *
 * Paths are symbolic until a {@link PermContext} (home, socket, XDG dirs, cwd) resolves them:
 * the launchers resolve them for the calling user at each start, the compile task for the
 * build host. Revoking a scoped path in Deno also drops every grant that *covers* it, so a
 * path is revoked only when no grant the mode keeps covers it (then nothing is lost); paths a
 * mode must not read under a kept grant are `--deny-read` at launch (`launch.ts`).
 *
 * @module
 */

import type { PermContext } from "./perm_context.ts";
export { contextFrom, defaultSocket, type PermContext } from "./perm_context.ts";
import { NPM_PASS_ENV } from "./npm_env.ts";
export { NPM_PASS_ENV };
import {
  covers,
  grantFlags,
  type Grants,
  GUEST_PATHS,
  type Mode,
  MODES,
  uniq,
} from "./perm_modes.ts";
export {
  covers,
  grantFlags,
  type Grants,
  GUEST_PATHS,
  type Mode,
  MODES,
  uniq,
} from "./perm_modes.ts";

/**
 * The programs a credential's `command:` may run in the proxy (by name, found on PATH):
 * GitHub's CLI, 1Password, Bitwarden (and rbw), pass, gopass, Vault, AWS, Azure and the
 * freedesktop secret store. A name not installed is simply not found.
 */
export const CREDENTIAL_PROGRAMS: readonly string[] = [
  "gh",
  "op",
  "bw",
  "rbw",
  "pass",
  "gopass",
  "vault",
  "aws",
  "az",
  "secret-tool",
];

/**
 * The managed networks' dnsmasq files beside the Incus socket (`/var/lib/incus/networks`),
 * read-only: the lease files tell when a booting guest has its address (mcp/host/leases.ts).
 * They are world-readable on the host; they hold addresses, MACs and names, no secret.
 */
function leasesDir(c: PermContext): string {
  return `${c.socket.replace(/\/[^/]*$/, "")}/networks`;
}

/** The table: for each mode, its grants as a function of the context. */
export const PERMISSIONS: Record<Mode, (c: PermContext) => Grants> = {
  // isb rpc: the Incus socket, files under its cwd (compose files, bind sources), locks and
  // egress CAs; env for ${VAR} interpolation; net for searched ports and a remote Incus.
  // Never the host user's keys, whatever the cwd: the isx config (credentials), state (CA
  // key) and ~/.ssh.
  rpc: (c) => ({
    read: [
      c.socket,
      c.cwd,
      c.tmp,
      c.isbStateDir,
      c.lockDir,
      "/etc/subuid",
      "/etc/subgid",
      `${c.programDir}/rpc`, // the library and the method table, imported after the hello
      `${c.programDir}/.prebuilt`, // the same, pre-built (rpc/prebuilt.ts)
    ],
    write: [c.socket, c.isbStateDir, c.lockDir],
    net: true,
    env: true,
    run: [],
    sys: ["uid", "gid", "hostname"],
    denyRead: [c.configDir, c.stateDir, `${c.home}/.ssh`],
  }),
  // The proxy server: the only mode that reads credentials or the CA's private key.
  proxy: (c) => ({
    read: [
      c.socket,
      `${c.configDir}/credentials.yaml`,
      `${c.configDir}/config.yaml`,
      `${c.configDir}/tools`, // tools' proxy: rules (docs/proxy.md)
      `${c.stateDir}/ca`,
      `${c.stateDir}/proxy`,
      `${c.isbStateDir}/egress`,
    ],
    write: [c.socket, `${c.stateDir}/ca`, `${c.stateDir}/proxy`],
    net: true,
    // DENO_DIR: the module cache a coordinator's isx mcp child runs from (cli/mcp_child.ts)
    env: ["ISX_LOG", "ISX_GIT_SHA", "DENO_DIR"],
    // gcloud: Vertex access tokens (credentials.yaml token_command); the password managers'
    // and token CLIs a credential's `command:` may name (docs/proxy.md); nft: the bridge
    // guard's table (proxy/callers/guard.ts), written with `nft -f -`; this program: a
    // coordinator's `isx mcp --caller-instance`, under the mcp mode's grants (cli/mcp_child.ts)
    run: ["gcloud", ...CREDENTIAL_PROGRAMS, "nft", c.execPath],
    sys: ["uid", "hostname", "networkInterfaces"],
  }),
  // isx proxy start|stop|status|logs|activity|dump|install|uninstall and isx dashboard
  // (xdg-open for --open): pid/log files, the
  // health port, the bridge (status), the right to start this same program again, and for
  // install what keeps it running across reboots: a systemd unit (only its own file), an
  // @reboot crontab line, or the boot script in the state directory (proxy_install.ts).
  "proxy-ctl": (c) => ({
    read: [
      c.socket,
      `${c.stateDir}/proxy`,
      `${c.configDir}/config.yaml`,
      c.programDir,
      "/proc/1/comm",
      "/usr/bin/crontab",
      "/bin/crontab",
      "/usr/local/bin/crontab",
      "/etc/systemd/system/isx-proxy.service",
      `${c.configDir.replace(/\/isx$/, "")}/systemd/user/isx-proxy.service`,
      "/etc/systemd/system/isx-pool.service", // the warm-pool keeper's unit (cli/pool.ts)
      `${c.configDir.replace(/\/isx$/, "")}/systemd/user/isx-pool.service`,
    ],
    write: [
      c.socket,
      `${c.stateDir}/proxy`,
      "/etc/systemd/system/isx-proxy.service",
      "/etc/systemd/system/isx-pool.service",
      `${c.configDir.replace(/\/isx$/, "")}/systemd/user`,
    ],
    net: true,
    env: ["TERM", "NO_COLOR", "COLUMNS", "ISX_GIT_SHA"],
    run: [c.execPath, "systemctl", "crontab", "xdg-open"],
    sys: ["uid"],
  }),
  // Inside an instance: the task files and the agents; never the network.
  guest: () => ({
    read: [GUEST_PATHS.run, GUEST_PATHS.tasks, "/etc/passwd", "/tmp"],
    write: [GUEST_PATHS.tasks, "/tmp"],
    net: [],
    env: true,
    run: ["bash", "sh", "claude", "codex", "pi", "opencode", "git", "node"],
    sys: [],
  }),
  // isx init: creates the config and state directories, the credentials skeleton and the CA.
  init: (c) => ({
    read: [c.socket, c.configDir, c.stateDir],
    write: [c.socket, c.configDir, c.stateDir],
    // The Incus socket needs a net grant (unix:<socket>) since Deno 2.9; a mode cannot
    // narrow the union's global net grant, so the socket modes keep net.
    net: true,
    env: [],
    run: [],
    sys: ["uid"],
  }),
  // isx build: definitions (never credentials), the CA certificate (never its key), the
  // download cache, npm on the host for packages guests cannot fetch themselves.
  build: (c) => ({
    read: [
      c.socket,
      leasesDir(c), // as isx branch's
      `${c.configDir}/config.yaml`,
      `${c.configDir}/templates`,
      `${c.configDir}/tools`,
      `${c.cwd}/.isx`,
      `${c.stateDir}/ca/ca.crt`,
      `${c.stateDir}/build`,
      c.cacheDir,
      c.programDir,
      c.execPath,
      c.tmp,
    ],
    write: [c.socket, c.cacheDir, `${c.stateDir}/build`, c.tmp],
    net: true, // the Incus socket (see init)
    // PATH/HOME and how this host reaches the npm registry (CA, proxy, mirror)
    env: ["TERM", "NO_COLOR", "PATH", "HOME", "ISX_GIT_SHA", ...NPM_PASS_ENV],
    run: ["npm", "tar", c.execPath],
    sys: ["uid"],
  }),
  // isx branch|list|start|stop|destroy|shell: the socket, the definitions, the CA
  // certificate (never its key) for isx list; the launcher's commit for the preflight.
  instances: (c) => ({
    read: [
      c.socket,
      leasesDir(c), // when a booting guest has its lease (mcp/host/leases.ts)
      `${c.configDir}/config.yaml`,
      `${c.configDir}/templates`,
      `${c.configDir}/tools`,
      `${c.cwd}/.isx`,
      `${c.stateDir}/ca/ca.crt`,
      `${c.stateDir}/mcp/sessions`, // isx list: which isx mcp holders still run (their locks)
      // isx branch's definition loader and its schemas, imported once its first requests
      // are sent (the program's own sources, read-only)
      `${c.programDir}/mcp/templates`,
      `${c.programDir}/rpc/vendor`,
      `${c.programDir}/.prebuilt`, // the same, pre-built (rpc/prebuilt.ts)
    ],
    write: [c.socket],
    net: true, // the Incus socket (see init)
    env: ["TERM", "NO_COLOR", "COLUMNS", "ISX_GIT_SHA"],
    run: [],
    sys: ["uid"],
  }),
  // isx mcp: the socket, the user's definitions and mcp settings (read only: the server never
  // writes its config), its own state (audit log, session lock files), the guest runner
  // sources and the program's own modules it imports after start; no program to run.
  mcp: (c) => ({
    read: [
      c.socket,
      leasesDir(c), // as isx branch's
      `${c.configDir}/config.yaml`,
      `${c.configDir}/mcp.yaml`,
      `${c.configDir}/templates`,
      `${c.configDir}/tools`,
      `${c.stateDir}/mcp`,
      `${c.stateDir}/ca/ca.crt`,
      // the dashboard's task reports (POST /tasks); never proxy.token, which stops the proxy
      `${c.stateDir}/proxy/task-report.token`,
      `${c.programDir}/guest`, // the agent runners it pushes into instances for delegate
      // its own sources: the session half (cli/mcp_backend.ts) loads after the handshake
      ...["cli", "mcp", "rpc", "proxy", ".prebuilt"].map((d) => `${c.programDir}/${d}`),
    ],
    write: [c.socket, `${c.stateDir}/mcp`],
    net: true, // the Incus socket (see init) and the proxy's health port on loopback
    env: ["ISX_GIT_SHA"],
    run: [],
    sys: ["uid"],
  }),
  // isx pool (the warm-pool keeper, mcp/pool/): the socket, the user's definitions and mcp
  // settings read-only, the CA certificate (never its key) for the CA repair, its lock and
  // log, the guest runner sources it puts in members of templates with agents; memory for
  // the host memory guard. No credentials: those stay the proxy's alone.
  pool: (c) => ({
    read: [
      c.socket,
      leasesDir(c), // as isx branch's
      `${c.programDir}/guest`,
      `${c.configDir}/config.yaml`,
      `${c.configDir}/mcp.yaml`,
      `${c.configDir}/templates`,
      `${c.configDir}/tools`,
      `${c.stateDir}/ca/ca.crt`,
      `${c.stateDir}/pool`,
    ],
    write: [c.socket, `${c.stateDir}/pool`],
    net: true, // the Incus socket (see init) and the proxy's health port on loopback
    env: ["ISX_GIT_SHA"],
    run: [],
    sys: ["uid", "systemMemoryInfo"],
  }),
  // --help, --version, and mistakes: nothing at all.
  info: () => ({ read: [], write: [], net: [], env: [], run: [], sys: [] }),
};

/**
 * The union of every mode's grants: what the process starts with. With a remote, also the
 * incus client config, which the CLI reads before entering the mode; no mode keeps it.
 */
export function unionGrants(c: PermContext): Grants {
  const all = MODES.map((m) => PERMISSIONS[m](c));
  return {
    read: uniq([...all.flatMap((g) => g.read), ...(c.incusConf ? [c.incusConf] : [])]),
    write: uniq(all.flatMap((g) => g.write)),
    net: all.some((g) => g.net === true) ? true : uniq(all.flatMap((g) => g.net as string[])),
    env: all.some((g) => g.env === true) ? true : uniq(all.flatMap((g) => g.env as string[])),
    run: uniq(all.flatMap((g) => g.run)),
    sys: uniq(all.flatMap((g) => g.sys)),
  };
}

/** The union flags: what the compile task records (one flag set for every mode). */
export function unionFlags(c: PermContext): string[] {
  return grantFlags(unionGrants(c));
}

type PathName = "read" | "write";

/**
 * Drops every grant the mode does not need, then checks the result: each kept grant still
 * granted, each dropped one denied. A mismatch is a bug in the table, so it throws.
 */
export function enterMode(mode: Mode, c: PermContext): void {
  const want = PERMISSIONS[mode](c);
  const have = unionGrants(c);
  const p = Deno.permissions;
  // Started without the mode's `--deny-read` (the compiled binary carries the union only):
  // revoke the paths instead. Deno then also drops every grant covering them (the cwd when
  // it is $HOME): the mode fails closed, reading less rather than the user's keys.
  const deny = want.denyRead ?? [];
  for (const path of deny) {
    if (p.querySync({ name: "read", path }).state === "granted") {
      p.revokeSync({ name: "read", path });
    }
  }
  for (const name of ["read", "write"] as PathName[]) {
    for (const path of have[name]) {
      // under a denial that had to be made by revoking (see above): revoke it too
      const open = name === "read" && deny.some((d) => covers(d, path));
      if (!open && want[name].some((k) => covers(k, path))) continue; // kept: nothing to ask
      // not granted (left out at launch): revoking would drop a grant covering it
      if (p.querySync({ name, path }).state !== "granted") continue;
      p.revokeSync({ name, path });
    }
  }
  if (want.net !== true) {
    if (have.net === true) p.revokeSync({ name: "net" });
    else {for (const host of have.net) {
        if (!want.net.includes(host)) p.revokeSync({ name: "net", host });
      }}
  }
  // A mode without `env: true` gets the variables it names from the snapshot the CLI takes
  // before entering the mode (Deno cannot narrow a global env grant), and no env access.
  if (want.env !== true) p.revokeSync({ name: "env" });
  for (const command of have.run) {
    if (!want.run.includes(command)) p.revokeSync({ name: "run", command });
  }
  if (want.run.length === 0) p.revokeSync({ name: "run" });
  for (const kind of have.sys) {
    if (!want.sys.includes(kind)) {
      p.revokeSync({
        name: "sys",
        kind: kind as NonNullable<Deno.SysPermissionDescriptor["kind"]>,
      });
    }
  }
  for (const name of ["read", "write"] as PathName[]) {
    for (const path of want[name]) {
      if (p.querySync({ name, path }).state === "granted") continue;
      if (name === "read" && deny.some((d) => covers(path, d))) continue; // failed closed
      throw new TypeError(`permission table: ${mode} lost ${name} of ${path}`);
    }
  }
  for (const path of deny) {
    if (p.querySync({ name: "read", path }).state === "granted") {
      throw new TypeError(`permission table: ${mode} can still read ${path}`);
    }
  }
  p.revokeSync({ name: "ffi" });
}
