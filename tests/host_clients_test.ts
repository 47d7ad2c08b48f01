/**
 * docs/mcp.md's "Clients" entries for Codex and opencode, with the real CLIs (npm, the
 * registry's current release) in a temp HOME laid out as a user's after demo.sh
 * (tests/helpers/host_clis.ts): registered exactly as the docs say, each starts `isx mcp`
 * from PATH, which answers its handshake and `tools/list` (mcp.log's connect line names the
 * client, its version and era), against a mock model API on loopback. No Incus is needed:
 * listing the tools touches none. (Claude Code, which also drives the tools, is
 * tests/live/host_claude_test.ts.)
 *
 * @module
 */

import assert from "node:assert/strict";
import { hostCli, userHome } from "./helpers/host_clis.ts";
import { ROOT } from "./helpers/spawn.ts";
import { startMockOpenAI } from "./fakes/mock_openai.ts";
import { startMockAnthropic } from "./fakes/mock_anthropic.ts";

const dec = new TextDecoder();

async function run(cmd: string, args: string[], env: Record<string, string>, cwd: string) {
  const child = new Deno.Command(cmd, {
    args,
    env,
    clearEnv: true,
    cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
  try {
    const out = await child.output();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  } finally {
    clearTimeout(timer);
  }
}

async function mcpLog(home: string): Promise<string> {
  return await Deno.readTextFile(`${home}/.local/state/isx/mcp/mcp.log`).catch(() => "");
}

async function withRoot(fn: (root: string) => Promise<void>) {
  const root = await Deno.realPath(await Deno.makeTempDir({ prefix: "isx-host-client-" }));
  try {
    await fn(root);
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

Deno.test("Codex: `codex mcp add isx -- isx mcp` registers isx mcp, which codex exec starts and lists", async () => {
  const codex = await hostCli("codex");
  const mock = startMockOpenAI();
  try {
    await withRoot(async (root) => {
      const { home, bin } = await userHome(root, ROOT);
      // Codex hands its MCP servers only HOME and PATH: no deno on this PATH, no ISX_DENO
      const env = { HOME: home, PATH: `${bin}:/usr/bin:/bin` };
      const added = await run(codex.bin, ["mcp", "add", "isx", "--", "isx", "mcp"], env, home);
      assert.equal(added.code, 0, added.stderr);
      const toml = await Deno.readTextFile(`${home}/.codex/config.toml`);
      assert.match(toml, /\[mcp_servers\.isx\]\ncommand = "isx"\nargs = \["mcp"\]/);
      const provider = [
        "model_provider=mock",
        "check_for_update_on_startup=false",
        "analytics.enabled=false",
        "features.plugins=false",
        'model_providers.mock.name="mock"',
        `model_providers.mock.base_url="${mock.origin}/v1"`,
        'model_providers.mock.env_key="OPENAI_API_KEY"',
        'model_providers.mock.wire_api="responses"',
        "model_providers.mock.supports_websockets=false",
      ].flatMap((c) => ["-c", c]);
      const r = await run(
        codex.bin,
        [
          "exec",
          "--json",
          "--skip-git-repo-check",
          ...provider,
          "hello",
        ],
        { ...env, OPENAI_API_KEY: "sk-placeholder" },
        home,
      );
      assert.equal(r.code, 0, r.stderr);
      assert.ok(r.stdout.includes('"type":"turn.completed"'), r.stdout);
      assert.equal(mock.modelCalls().length, 1);
      const log = await mcpLog(home);
      assert.match(
        log,
        new RegExp(
          ` tool=connect outcome=initialize ms=0 detail=client="codex-mcp-client" ` +
            `version="${codex.version.replaceAll(".", "\\.")}" protocol="\\d{4}-\\d{2}-\\d{2}"`,
        ),
        log,
      );
    });
  } finally {
    await mock.close();
  }
});

Deno.test("opencode: the opencode.json mcp block starts isx mcp, whose 17 tools reach the model", async () => {
  const oc = await hostCli("opencode");
  const mock = startMockAnthropic();
  try {
    await withRoot(async (root) => {
      const { home, bin } = await userHome(root, ROOT);
      await Deno.mkdir(`${home}/.config/opencode`, { recursive: true });
      await Deno.mkdir(`${home}/proj`);
      // the block docs/mcp.md gives, plus a model provider on the mock
      await Deno.writeTextFile(
        `${home}/.config/opencode/opencode.json`,
        JSON.stringify({
          $schema: "https://opencode.ai/config.json",
          mcp: { isx: { type: "local", command: ["isx", "mcp"], enabled: true } },
          provider: {
            anthropic: { options: { baseURL: `${mock.origin}/v1`, apiKey: "sk-ant-placeholder" } },
          },
          model: "anthropic/claude-sonnet-4-5",
          autoupdate: false,
          share: "disabled",
        }),
      );
      const env = { HOME: home, PATH: `${bin}:/usr/bin:/bin`, OPENCODE_DISABLE_AUTOUPDATE: "1" };
      const r = await run(oc.bin, ["run", "--format", "json", "hello"], env, `${home}/proj`);
      assert.equal(r.code, 0, r.stderr);
      assert.ok(r.stdout.includes("MOCK_REPLY"), r.stdout);
      const withTools = mock.modelCalls().find((c) => Array.isArray(c.json?.tools));
      const names = ((withTools?.json?.tools ?? []) as { name: string }[]).map((t) => t.name)
        .filter((n) => n.startsWith("isx_"));
      assert.equal(names.length, 17, JSON.stringify(names));
      assert.ok(names.includes("isx_create_instance"));
      const log = await mcpLog(home);
      assert.match(
        log,
        new RegExp(
          ` tool=connect outcome=initialize ms=0 detail=client="opencode" ` +
            `version="${oc.version.replaceAll(".", "\\.")}" protocol="\\d{4}-\\d{2}-\\d{2}"`,
        ),
        log,
      );
    });
  } finally {
    await mock.close();
  }
});
