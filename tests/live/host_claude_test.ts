/**
 * The real Claude Code (npm `@anthropic-ai/claude-code`, the registry's current release) as
 * the host agent (issue 19): registered exactly as docs/mcp.md says (`claude mcp add -s user
 * isx -- isx mcp`, `isx` found on PATH through a link to bin/isx, no deno on PATH), run
 * headless with `--allowedTools mcp__isx`, against a scripted Anthropic API on loopback
 * (tests/fakes/mock_host_agent.ts) that first selects the isx tools through Claude's
 * ToolSearch (it defers MCP tools), then runs list_templates → create_instance → exec →
 * background exec → wait_any → task_result → destroy_instance. Every tool result is checked
 * as the model received it. The instance lands in a project this test made (INCUS_PROJECT),
 * on its bridge; Claude's HOME is a temp dir (the user's ~/.claude is never read or written);
 * under strace, every network connection Claude and isx make goes to loopback or the test
 * bridge's gateway, and none is a DNS lookup.
 *
 * @module
 */

import assert from "node:assert/strict";
import { NO_INCUS } from "../helpers/live.ts";
import { HostLab } from "../helpers/host_lab.ts";
import { HostProxy } from "../helpers/host_proxy.ts";
import { hostClaude } from "../helpers/host_clis.ts";
import { type SeenResult, startMockHostAgent } from "../fakes/mock_host_agent.ts";
import { ROOT } from "../helpers/spawn.ts";
import { isNotFound } from "../../rpc/mod.ts";

const TEMPLATE = "tpl-minimal";
const DENO_DIR = Deno.env.get("DENO_DIR") ||
  `${Deno.env.get("XDG_CACHE_HOME") || `${Deno.env.get("HOME")}/.cache`}/deno`;
const dec = new TextDecoder();

/** The JSON a tool result's text holds (isx answers its structured content as JSON text). */
function json(s: SeenResult | undefined): Record<string, unknown> {
  assert.ok(s, "no such result");
  assert.equal(s.isError, false, `${s.tool}: ${s.text}`);
  return JSON.parse(s.text);
}
const last = (seen: SeenResult[], tool: string) => seen.filter((s) => s.tool === tool).at(-1);

async function run(cmd: string, args: string[], env: Record<string, string>, cwd: string) {
  const out = await new Deno.Command(cmd, {
    args,
    env,
    clearEnv: true,
    cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test({
  name:
    "the real claude CLI drives isx mcp as registered by docs/mcp.md: ToolSearch, then create, exec, a task, destroy",
  ignore: NO_INCUS,
  async fn() {
    const claude = await hostClaude();
    await using lab = await HostLab.open({ template: TEMPLATE });
    await using proxy = await HostProxy.start(lab);
    const root = await Deno.realPath(await Deno.makeTempDir({ prefix: "isx-host-claude-" }));
    const mock = startMockHostAgent("isx", [
      { tool: "list_templates", input: () => ({}) },
      { tool: "create_instance", input: () => ({ template: TEMPLATE, name_hint: "claude" }) },
      {
        tool: "exec",
        input: (s) => ({
          instance: json(last(s, "mcp__isx__create_instance")).instance,
          command: "echo hello-from-claude",
        }),
      },
      {
        tool: "exec",
        input: (s) => ({
          instance: json(last(s, "mcp__isx__create_instance")).instance,
          command: "sleep 2; echo bg-done",
          background: true,
        }),
      },
      { tool: "wait_any", input: () => ({ timeout_seconds: 120 }) },
      {
        tool: "task_result",
        input: (s) => ({ task_id: json(last(s, "mcp__isx__exec")).task_id }),
      },
      {
        tool: "destroy_instance",
        input: (s) => ({ instance: json(last(s, "mcp__isx__create_instance")).instance }),
      },
    ]);
    try {
      const home = `${root}/home`;
      const bin = `${root}/bin`;
      await Deno.mkdir(`${home}/.config/isx`, { recursive: true });
      await Deno.mkdir(bin);
      // `isx` as demo.sh puts it on PATH: a link to the launcher; no deno on this PATH
      await Deno.symlink(`${ROOT}/bin/isx`, `${bin}/isx`);
      await Deno.symlink(claude.bin, `${bin}/claude`);
      await Deno.writeTextFile(`${home}/.config/isx/config.yaml`, proxy.config(lab));
      await Deno.writeTextFile(`${home}/.config/isx/mcp.yaml`, `templates: [${TEMPLATE}]\n`);
      const env = {
        HOME: home,
        PATH: `${bin}:/usr/bin:/bin`,
        // the launcher's deno and module cache (a temp HOME has neither)
        ISX_DENO: Deno.execPath(),
        DENO_DIR,
        INCUS_PROJECT: lab.project,
        NO_COLOR: "1",
        ...(Deno.env.get("INCUS_SOCKET") ? { INCUS_SOCKET: Deno.env.get("INCUS_SOCKET")! } : {}),
      };
      const added = await run(
        "claude",
        ["mcp", "add", "-s", "user", "isx", "--", "isx", "mcp"],
        env,
        home,
      );
      assert.equal(added.code, 0, added.stdout + added.stderr);
      const cfg = JSON.parse(await Deno.readTextFile(`${home}/.claude.json`));
      assert.deepEqual(
        { command: cfg.mcpServers?.isx?.command, args: cfg.mcpServers?.isx?.args },
        { command: "isx", args: ["mcp"] },
      );
      const trace = `${root}/trace`;
      const r = await run("strace", [
        "-f",
        "-qq",
        "-e",
        "trace=connect",
        "-o",
        trace,
        `${bin}/claude`,
        "-p",
        "Use the isx tools: make an instance, run a command in it and a background task, then destroy it.",
        "--output-format",
        "stream-json",
        "--verbose",
        "--allowedTools",
        "mcp__isx",
      ], {
        ...env,
        ANTHROPIC_BASE_URL: mock.origin,
        ANTHROPIC_API_KEY: "sk-ant-placeholder",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      }, home);
      const events = r.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) =>
        JSON.parse(l)
      );
      const init = events.find((e) => e.type === "system" && e.subtype === "init");
      // registered in user scope (its connection may still be pending at init under strace)
      assert.deepEqual(
        (init?.mcp_servers ?? []).map((m: { name: string; source: string }) => [m.name, m.source]),
        [["isx", "user"]],
      );
      assert.equal(init?.claude_code_version ?? claude.version, claude.version);
      const result = events.find((e) => e.type === "result");
      assert.equal(r.code, 0, `${r.stderr}\n${r.stdout.slice(-3000)}`);
      assert.equal(result?.is_error, false, JSON.stringify(result));
      assert.match(mock.finalText(), /^MOCK_HOST_DONE after 7 isx calls$/);

      // what the model saw, step by step
      const seen = mock.seen();
      assert.deepEqual(seen.map((s) => s.tool), [
        "ToolSearch",
        "mcp__isx__list_templates",
        "mcp__isx__create_instance",
        "mcp__isx__exec",
        "mcp__isx__exec",
        "mcp__isx__wait_any",
        "mcp__isx__task_result",
        "mcp__isx__destroy_instance",
      ]);
      assert.equal(seen[0]!.isError, false, seen[0]!.text);
      for (const t of ["list_templates", "create_instance", "exec", "wait_any", "task_result"]) {
        assert.ok(
          seen[0]!.text.includes(`mcp__isx__${t}`),
          `ToolSearch found ${t}: ${seen[0]!.text}`,
        );
      }
      const templates = json(seen[1]).templates as { template: string; built?: boolean }[];
      assert.ok(templates.some((t) => t.template === TEMPLATE), seen[1]!.text);
      const name = String(json(seen[2]).instance);
      assert.match(name, /^mcp-minimal-claude-/);
      const fg = json(seen[3]);
      assert.equal(fg.exit_code, 0, seen[3]!.text);
      assert.equal(fg.stdout, "hello-from-claude\n");
      const task = String(json(seen[4]).task_id);
      assert.ok(task, seen[4]!.text);
      assert.deepEqual(json(seen[5]).finished, [task], seen[5]!.text);
      const res = json(seen[6]);
      assert.equal(res.exit_code, 0, seen[6]!.text);
      assert.equal(res.stdout, "bg-done\n");
      assert.equal(json(seen[7]).already, false, seen[7]!.text);
      // in the test's project, and gone
      await assert.rejects(lab.scoped.getInstance(name), (e) => isNotFound(e));
      assert.equal(
        mock.modelCalls().every((c) => c.headers["x-api-key"] === "sk-ant-placeholder"),
        true,
      );

      // mcp.log: which client, which era
      const log = await Deno.readTextFile(`${home}/.local/state/isx/mcp/mcp.log`);
      assert.match(
        log,
        new RegExp(
          ` tool=connect outcome=(initialize|server/discover|stateless) ms=0 detail=client="[^"]+" ` +
            `version="${claude.version.replaceAll(".", "\\.")}"`,
        ),
        log,
      );

      // bounded: loopback and the test bridge only, no DNS lookup
      const connects = (await Deno.readTextFile(trace)).split("\n").filter((l) =>
        /\bconnect\(/.test(l) && /AF_INET6?/.test(l)
      );
      const allowed = (l: string) =>
        /inet_addr\("127\.0\.0\.1"\)/.test(l) || /inet_pton\(AF_INET6, "::1"/.test(l) ||
        l.includes(`inet_addr("${lab.gateway}")`);
      const outside = connects.filter((l) => !allowed(l) || /htons\(53\)/.test(l));
      assert.deepEqual(
        outside,
        [],
        `connections outside loopback and the test bridge:\n${outside.join("\n")}`,
      );
      assert.ok(connects.some((l) => l.includes(`htons(${mock.port})`)), "claude reached the mock");
    } finally {
      await mock.close();
      await Deno.remove(root, { recursive: true }).catch(() => {});
    }
  },
});
