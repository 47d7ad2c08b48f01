import assert from "node:assert/strict";
import { AGENT_NAMES, agentLaunch, type LaunchRequest, opencodeModel } from "./mod.ts";

const CLAUDE_SID = "9c3f0000-0000-4000-8000-000000000001";
const FILE = "/var/lib/isx/tasks/t1-abcd/pi-session.jsonl";

function req(r: Partial<LaunchRequest> & Pick<LaunchRequest, "agent">): LaunchRequest {
  return { run: 1, ...(r.agent === "pi" ? { sessionFile: FILE } : {}), ...r };
}

Deno.test("agentLaunch gives every agent full access and never a turn limit", () => {
  const full: Record<string, string[]> = {
    claude: ["--permission-mode", "bypassPermissions"],
    codex: ['sandbox_mode="danger-full-access"', 'approval_policy="never"'],
    pi: ["--mode", "json"],
    opencode: ["--auto"],
  };
  for (const agent of AGENT_NAMES) {
    const l = agentLaunch(req({ agent }));
    for (const f of full[agent]!) assert.ok(l.argv.includes(f), `${agent}: ${f}`);
    assert.ok(!l.argv.some((a) => /max.turns/.test(a)), `${agent} has no turn limit`);
    assert.equal(l.argv[0], agent);
  }
});

Deno.test("agentLaunch resumes each agent's own way", () => {
  const c = agentLaunch(req({ agent: "claude", run: 2, session: CLAUDE_SID }));
  assert.deepEqual(c.argv.slice(-2), ["--resume", CLAUDE_SID]);
  const x = agentLaunch(req({ agent: "codex", run: 2, session: CLAUDE_SID }));
  assert.deepEqual(x.argv.slice(0, 3), ["codex", "exec", "resume"]);
  assert.deepEqual(x.argv.slice(-2), [CLAUDE_SID, "-"]);
  const o = agentLaunch(req({ agent: "opencode", run: 3, session: "ses_dce11ced4ffeAAAA" }));
  assert.deepEqual(o.argv.slice(-2), ["--session", "ses_dce11ced4ffeAAAA"]);
  const p = agentLaunch(req({ agent: "pi", run: 2, session: CLAUDE_SID }));
  assert.deepEqual(p.argv.slice(-2), ["--session", FILE], "pi resumes by its session file");
  for (const agent of AGENT_NAMES) {
    assert.throws(() => agentLaunch(req({ agent, run: 2 })), /needs the session of run 1/);
  }
});

Deno.test("agentLaunch refuses values an agent would read as options", () => {
  for (const agent of AGENT_NAMES) {
    assert.throws(
      () => agentLaunch(req({ agent, model: "--dangerously-skip-permissions" })),
      /invalid model/,
    );
    assert.throws(
      () => agentLaunch(req({ agent, run: 2, session: "--help" })),
      /invalid .* session id/,
    );
  }
  assert.throws(() => agentLaunch(req({ agent: "pi", sessionFile: "rel.jsonl" })), /session file/);
  assert.throws(() => agentLaunch(req({ agent: "claude", run: 0 })), /invalid run number 0/);
});

Deno.test("agentLaunch puts the brief in the system prompt or at the head of run 1", () => {
  const c = agentLaunch(req({ agent: "claude", brief: "B" }));
  assert.deepEqual(c.argv.slice(-2), ["--append-system-prompt", "B"]);
  for (const agent of ["claude", "pi"] as const) {
    const later = agentLaunch(req({ agent, brief: "B", run: 2, session: CLAUDE_SID }));
    assert.ok(later.argv.includes("--append-system-prompt"), `${agent}: every run has the brief`);
    assert.equal(later.promptPrefix, "");
  }
  for (const agent of ["codex", "opencode"] as const) {
    assert.match(agentLaunch(req({ agent, brief: "B" })).promptPrefix, /^B\n\n---\n\n$/);
    const session = agent === "codex" ? CLAUDE_SID : "ses_dce11ced4ffeAAAA";
    const later = agentLaunch(req({ agent, brief: "B", run: 2, session }));
    assert.equal(later.promptPrefix, "", `${agent}: the session already has the brief`);
  }
});

Deno.test("opencodeModel gives a bare id the configured model's provider", () => {
  assert.equal(
    opencodeModel("claude-haiku-4-5", "anthropic/claude-sonnet-4-6"),
    "anthropic/claude-haiku-4-5",
  );
  assert.equal(opencodeModel("openai/gpt-5.5", undefined), "openai/gpt-5.5");
  assert.throws(() => opencodeModel("claude-haiku-4-5", undefined), /provider\/model/);
  const l = agentLaunch(req({ agent: "opencode", model: "x", configuredModel: "anthropic/y" }));
  assert.deepEqual(l.argv.slice(l.argv.indexOf("--model"), l.argv.indexOf("--model") + 2), [
    "--model",
    "anthropic/x",
  ]);
});

Deno.test("agentLaunch one-shot (ask): tools off where the agent allows, no session, no full access", () => {
  const off: Record<string, string[]> = {
    claude: ["--tools", "", "--no-session-persistence"],
    codex: ['sandbox_mode="read-only"', "--ephemeral"],
    pi: ["--no-session", "--no-tools"],
    opencode: ["--title", "isx ask"],
  };
  for (const agent of AGENT_NAMES) {
    const l = agentLaunch({ agent, run: 1, oneShot: true, brief: "the brief" });
    for (const f of off[agent]!) assert.ok(l.argv.includes(f), `${agent}: ${f}`);
    for (const full of ["bypassPermissions", 'sandbox_mode="danger-full-access"', "--auto"]) {
      assert.ok(!l.argv.includes(full), `${agent} has no full access: ${full}`);
    }
    assert.ok(!l.argv.includes("--session") && !l.argv.includes("--resume"), agent);
    assert.throws(
      () => agentLaunch({ agent, run: 2, session: CLAUDE_SID, oneShot: true }),
      /one-shot .* run is run 1/,
    );
  }
  const i = agentLaunch({ agent: "claude", run: 1, oneShot: true }).argv.indexOf("--tools");
  assert.equal(agentLaunch({ agent: "claude", run: 1, oneShot: true }).argv[i + 1], "");
  const oc = agentLaunch({ agent: "opencode", run: 1, oneShot: true });
  assert.deepEqual(JSON.parse(oc.env.OPENCODE_CONFIG_CONTENT!), { tools: { "*": false } });
  assert.equal(agentLaunch({ agent: "opencode", run: 1 }).env.OPENCODE_CONFIG_CONTENT, undefined);
});
