/**
 * The host agents' CLIs the client tests drive, installed from the npm registry with npm
 * itself (the way a user installs them), once per version, under the user's cache
 * (`~/.cache/isx-test-clis/<name>-<version>`), never into the repository or on PATH. The
 * version is the registry's current release unless `ISX_TEST_CLAUDE_VERSION` pins one.
 * Install scripts are not run: Claude Code's only copies the platform package's native
 * binary, which is used from that package directly.
 *
 * @module
 */

const dec = new TextDecoder();

async function npm(args: string[]): Promise<string> {
  const out = await new Deno.Command("npm", { args, stdout: "piped", stderr: "piped" }).output();
  if (!out.success) throw new Error(`npm ${args.join(" ")}: ${dec.decode(out.stderr).trim()}`);
  return dec.decode(out.stdout).trim();
}

function cacheDir(): string {
  const cache = Deno.env.get("XDG_CACHE_HOME") || `${Deno.env.get("HOME") ?? "/root"}/.cache`;
  return `${cache}/isx-test-clis`;
}

/** One CLI: its npm package, and where the native binary lies in its platform package. */
interface CliPackage {
  pkg: string;
  /** Pins the version instead of the registry's current release. */
  pinEnv: string;
  /** The binary, relative to `node_modules/`. */
  bin: string;
  /** The first word `--version` prints. */
  versionOf: (out: string) => string;
}

const CLIS: Record<"claude" | "codex" | "opencode", CliPackage> = {
  claude: {
    pkg: "@anthropic-ai/claude-code",
    pinEnv: "ISX_TEST_CLAUDE_VERSION",
    bin: "@anthropic-ai/claude-code-linux-x64/claude",
    versionOf: (o) => o.split(" ")[0] ?? "",
  },
  codex: {
    pkg: "@openai/codex",
    pinEnv: "ISX_TEST_CODEX_VERSION",
    bin: "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
    versionOf: (o) => o.split(" ").at(-1) ?? "",
  },
  opencode: {
    pkg: "opencode-ai",
    pinEnv: "ISX_TEST_OPENCODE_VERSION",
    bin: "opencode-linux-x64/bin/opencode",
    versionOf: (o) => o.split(" ")[0] ?? "",
  },
};

/** A host CLI's native binary and its version (installed on first use). */
export async function hostCli(
  name: keyof typeof CLIS,
): Promise<{ bin: string; version: string }> {
  const c = CLIS[name];
  const version = Deno.env.get(c.pinEnv) || await npm(["view", c.pkg, "version"]);
  if (!/^\d+\.\d+\.\d+$/.test(version)) throw new Error(`${name} version "${version}"`);
  const dir = `${cacheDir()}/${name}-${version}`;
  const bin = `${dir}/node_modules/${c.bin}`;
  const ok = await Deno.stat(bin).then((s) => s.isFile, () => false);
  if (!ok) {
    await npm([
      "install",
      "--prefix",
      dir,
      "--no-save",
      "--no-package-lock",
      "--no-audit",
      "--no-fund",
      "--ignore-scripts",
      `${c.pkg}@${version}`,
    ]);
  }
  const out = await new Deno.Command(bin, {
    args: ["--version"],
    stdout: "piped",
    env: { HOME: dir },
  }).output();
  const got = c.versionOf(dec.decode(out.stdout).trim());
  if (got !== version) throw new Error(`${bin} --version: "${got}", not ${version}`);
  return { bin, version };
}

/** Claude Code's native binary and its version (installed on first use). */
export function hostClaude(): Promise<{ bin: string; version: string }> {
  return hostCli("claude");
}

/**
 * A temp HOME laid out as a user's after `scripts/demo.sh`: Deno where install-deno.sh puts it
 * (`~/.cache/deno-npm/…`, a link to this test's deno) and its module cache (`~/.cache/deno`,
 * a link to this test's), and `<root>/bin` holding `isx` as a link to bin/isx. So a client
 * that passes its MCP servers only HOME and PATH (Codex) starts `isx mcp` as it would there.
 */
export async function userHome(root: string, repo: string): Promise<{ home: string; bin: string }> {
  const home = `${root}/home`;
  const bin = `${root}/bin`;
  const npmDeno = `${home}/.cache/deno-npm/2.9.6/node_modules/@deno/linux-x64-glibc`;
  await Deno.mkdir(npmDeno, { recursive: true });
  await Deno.mkdir(bin, { recursive: true });
  await Deno.symlink(Deno.execPath(), `${npmDeno}/deno`);
  const denoDir = Deno.env.get("DENO_DIR") ||
    `${Deno.env.get("XDG_CACHE_HOME") || `${Deno.env.get("HOME")}/.cache`}/deno`;
  await Deno.symlink(denoDir, `${home}/.cache/deno`);
  await Deno.symlink(`${repo}/bin/isx`, `${bin}/isx`);
  return { home, bin };
}
