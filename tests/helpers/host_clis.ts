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

/** Claude Code's native binary and its version (installed on first use). */
export async function hostClaude(): Promise<{ bin: string; version: string }> {
  const version = Deno.env.get("ISX_TEST_CLAUDE_VERSION") ||
    await npm(["view", "@anthropic-ai/claude-code", "version"]);
  if (!/^\d+\.\d+\.\d+$/.test(version)) throw new Error(`claude version "${version}"`);
  const dir = `${cacheDir()}/claude-${version}`;
  const bin = `${dir}/node_modules/@anthropic-ai/claude-code-linux-x64/claude`;
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
      `@anthropic-ai/claude-code@${version}`,
    ]);
  }
  const out = await new Deno.Command(bin, { args: ["--version"], stdout: "piped" }).output();
  const got = dec.decode(out.stdout).trim();
  if (!got.startsWith(version)) throw new Error(`${bin} --version: "${got}", not ${version}`);
  return { bin, version };
}
