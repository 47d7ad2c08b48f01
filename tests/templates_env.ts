/**
 * A throw-away isx home for template and instance tests: config, state and cache
 * directories under one temp dir (XDG_* point there, so the user's real ones are never
 * touched), definition files written by the test, and `isx ...` run as a child process
 * under the permission table (tests/helpers/spawn.ts). DENO_DIR stays the real one so the
 * child finds its cached npm packages.
 *
 * @module
 */

import { activeLab, labProxyYaml } from "./helpers/lab.ts";
import { programArgs } from "./helpers/spawn.ts";

/** The outcome of one `isx` run. */
export interface IsxRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** A temporary isx home. */
export class IsxHome implements AsyncDisposable {
  readonly root: string;
  readonly configDir: string;
  readonly stateDir: string;
  readonly cacheDir: string;
  readonly env: Record<string, string>;

  /**
   * `config`: false leaves `config.yaml` to the test (`isx init` writes it); otherwise a live
   * test's home gets the lab's bridges in it.
   */
  constructor(opts: { cacheDir?: string; config?: boolean } = {}) {
    this.root = Deno.makeTempDirSync({ prefix: "isx-home-" });
    const home = Deno.env.get("HOME") ?? "/root";
    const denoDir = Deno.env.get("DENO_DIR") ||
      `${Deno.env.get("XDG_CACHE_HOME") || `${home}/.cache`}/deno`;
    this.env = {
      HOME: this.root,
      XDG_CONFIG_HOME: `${this.root}/config`,
      XDG_STATE_HOME: `${this.root}/state`,
      XDG_CACHE_HOME: opts.cacheDir ?? `${this.root}/cache`,
      DENO_DIR: denoDir,
      ISX_PROG: "isx",
      NO_COLOR: "1",
    };
    this.configDir = `${this.root}/config/isx`;
    this.stateDir = `${this.root}/state/isx`;
    this.cacheDir = `${this.env.XDG_CACHE_HOME}/isx`;
    // in a live test, the lab's bridges (tests/helpers/lab.ts): never the user's incusbr0 or
    // isxproxy0, whose gateways the user's proxy serves
    const lab = activeLab();
    if (lab) {
      this.env.INCUS_PROJECT = lab.project;
      if (opts.config ?? true) {
        Deno.mkdirSync(this.configDir, { recursive: true });
        Deno.writeTextFileSync(`${this.configDir}/config.yaml`, labProxyYaml(lab));
      }
    }
  }

  /** Writes a definition file (`templates/<name>.yaml` or `tools/<name>.yaml`). */
  define(kind: "templates" | "tools", name: string, yaml: string): string {
    const dir = `${this.configDir}/${kind}`;
    Deno.mkdirSync(dir, { recursive: true });
    const path = `${dir}/${name}.yaml`;
    Deno.writeTextFileSync(path, yaml);
    return path;
  }

  /** Runs `isx <args>` to completion. */
  async isx(args: string[], opts: { cwd?: string; timeoutMs?: number } = {}): Promise<IsxRun> {
    const cwd = opts.cwd ?? this.root;
    const child = new Deno.Command(Deno.execPath(), {
      args: programArgs(args, { env: this.env, cwd }),
      cwd,
      env: this.env,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 900_000);
    try {
      const out = await child.output();
      const dec = new TextDecoder();
      return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Removes the temp dir. */
  [Symbol.asyncDispose](): Promise<void> {
    return Deno.remove(this.root, { recursive: true }).catch(() => {});
  }
}
