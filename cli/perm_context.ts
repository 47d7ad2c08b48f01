/**
 * Where things live for one user (home, Incus socket, XDG directories, cwd): the context the
 * permission table (`permissions.ts`) resolves its symbolic paths in, from the environment.
 *
 * @module
 */

/** Where things live for one user; everything a grant may name. */
export interface PermContext {
  /** Home directory. */
  home: string;
  /** The Incus unix socket. */
  socket: string;
  /** isx configuration: config.yaml, templates/, tools/, credentials.yaml. */
  configDir: string;
  /** isx state: ca/, proxy/, mcp/, build logs. */
  stateDir: string;
  /** isx host-side download cache (npm packages for guests). */
  cacheDir: string;
  /** isb state (egress CAs), shared with the original isb. */
  isbStateDir: string;
  /** isb lock directory (`$XDG_RUNTIME_DIR/isb` or `<tmp>/isb-<uid>/isb`). */
  lockDir: string;
  /** The working directory at start. */
  cwd: string;
  /** The temp directory. */
  tmp: string;
  /** The program's own source directory (guest scripts are read from it). */
  programDir: string;
  /** The runtime executable (deno, or the compiled binary). */
  execPath: string;
  /**
   * The incus client's config directory (remotes, client certificate), set only when the
   * invocation names a remote (or follows config.yml's `default-remote`, see
   * {@link followedDefaultRemote}): read before the mode is entered, never by a mode.
   */
  incusConf?: string;
}

/** Resolves the context for the current user from environment values (empty = unset). */
export function contextFrom(
  env: (key: string) => string | undefined,
  fixed: {
    cwd: string;
    uid: number;
    programDir: string;
    execPath: string;
    socket?: string;
    /** True when `--remote` or INCUS_REMOTE names an Incus remote. */
    remote?: boolean;
  },
): PermContext {
  const get = (k: string) => {
    const v = env(k);
    return v === undefined || v === "" ? undefined : v;
  };
  const home = get("HOME") ?? "/root";
  const config = get("XDG_CONFIG_HOME") ?? `${home}/.config`;
  const state = get("XDG_STATE_HOME") ?? `${home}/.local/state`;
  const cache = get("XDG_CACHE_HOME") ?? `${home}/.cache`;
  const tmp = (get("TMPDIR") ?? "/tmp").replace(/\/+$/, "") || "/tmp";
  const runtime = get("XDG_RUNTIME_DIR");
  return {
    home,
    socket: fixed.socket ?? defaultSocket(get),
    configDir: `${config}/isx`,
    stateDir: `${state}/isx`,
    cacheDir: `${cache}/isx`,
    isbStateDir: `${state}/isb`,
    lockDir: runtime ? `${runtime}/isb` : `${tmp}/isb-${fixed.uid}`,
    cwd: fixed.cwd,
    tmp,
    programDir: fixed.programDir,
    execPath: fixed.execPath,
    ...(fixed.remote ? { incusConf: incusConfDir(get) } : {}),
  };
}

/** The incus client config directory: INCUS_CONF, else $HOME/.config/incus (as `incus`). */
export function incusConfDir(get: (k: string) => string | undefined): string {
  const conf = get("INCUS_CONF");
  if (conf) return conf.replace(/(.)\/+$/, "$1");
  return `${get("HOME") ?? "/root"}/.config/incus`;
}

/** The Incus socket when no flag names one: INCUS_SOCKET, then $INCUS_DIR/unix.socket. */
export function defaultSocket(get: (k: string) => string | undefined): string {
  const sock = get("INCUS_SOCKET");
  if (sock) return sock;
  const dir = get("INCUS_DIR");
  return dir ? `${dir}/unix.socket` : "/var/lib/incus/unix.socket";
}

/**
 * The remote config.yml's `default-remote` names, when it is not `local` (pure; incus writes
 * the key as one top-level line, `incus remote switch NAME`).
 */
export function defaultRemoteOf(configYml: string): string | undefined {
  const m = /^default-remote:[ \t]*(.*?)[ \t]*(?:#.*)?$/m.exec(configYml);
  const v = m?.[1]?.replace(/^(["'])(.*)\1$/, "$2");
  return v && v !== "local" ? v : undefined;
}

/**
 * The remote an invocation follows when it names none (docs/decisions.md, "isx follows the
 * incus client's default-remote"): config.yml's `default-remote` when it names a remote other
 * than `local`, unless a remote (`INCUS_REMOTE`) or a socket (`--socket`, `INCUS_SOCKET`,
 * `INCUS_DIR`) is named, and only when config.yml can be read (`read` answers undefined for a
 * missing file or one the process may not read: then the socket stays the default).
 */
export function followedDefaultRemote(
  get: (key: string) => string | undefined,
  o: { socketFlag: boolean; read: (path: string) => string | undefined },
): string | undefined {
  const set = (k: string) => (get(k) ?? "") !== "";
  if (o.socketFlag || set("INCUS_REMOTE") || set("INCUS_SOCKET") || set("INCUS_DIR")) {
    return undefined;
  }
  const text = o.read(`${incusConfDir((k) => (set(k) ? get(k) : undefined))}/config.yml`);
  return text === undefined ? undefined : defaultRemoteOf(text);
}

/**
 * Reads a file's text; undefined when it is missing or this process may not read it. The
 * grant is asked first: a denied read throws `NotCapable`, whose first throw cost up to 12 ms
 * of a start here (most starts of `isx` read the incus client's config.yml outside their grant).
 */
export function readIfPermitted(path: string): string | undefined {
  if (Deno.permissions.querySync({ name: "read", path }).state !== "granted") return undefined;
  try {
    return Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotCapable) return undefined;
    if (e instanceof Deno.errors.PermissionDenied || e instanceof Deno.errors.IsADirectory) {
      return undefined;
    }
    throw e;
  }
}
