import assert from "node:assert/strict";
import {
  agentOfArgv,
  attachedPids,
  parsePresence,
  type PresenceAgent,
  resumedSession,
  withPresence,
} from "./presence.ts";

const b64 = (s: string) => btoa(String.fromCharCode(...new TextEncoder().encode(s)));
const proc = (
  pid: number,
  argv: string[],
  o: { mark?: string; join?: string; cwd?: string } = {},
) =>
  `presence proc ${pid} ${o.mark ?? "-"} ${o.join ?? "-"} ${o.cwd ? b64(o.cwd) : "-"} ${
    b64(argv.join("\0") + "\0")
  }`;
const task = (id: string, agent: string, session: string, cwd: string) =>
  `presence task ${id} ${agent} ${session} ${b64(cwd)}`;

const UUID = "0f0f0f0f-1111-2222-3333-444444444444";
const SES = "ses_abcdefgh1234";
const CODEX_NATIVE =
  "/opt/isx/npm/@openai+codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";

// The process shapes measured in tpl-agents (ps of a person's agent on a terminal), and
// the headless runs' shapes.
const SHAPES: Array<[string, string[], PresenceAgent | undefined, string | undefined]> = [
  ["claude native, --resume", ["claude", "--resume", UUID], "claude", UUID],
  ["claude by path, -r", ["/usr/local/bin/claude", "-r", UUID], "claude", UUID],
  ["claude --resume=", ["claude", `--resume=${UUID}`], "claude", UUID],
  ["claude --session-id", ["claude.exe", "--session-id", UUID], "claude", UUID],
  [
    "claude through node",
    [
      "node",
      "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js",
      "--resume",
      UUID,
    ],
    "claude",
    UUID,
  ],
  ["claude headless", ["claude", "-p", "--output-format", "stream-json"], "claude", undefined],
  ["codex native resume", [CODEX_NATIVE, "resume", UUID], "codex", UUID],
  ["codex node launcher", ["node", "/usr/local/bin/codex", "resume", UUID], "codex", UUID],
  [
    "codex launcher by package path",
    [
      "node",
      "/opt/isx/npm/@openai+codex/node_modules/@openai/codex/bin/codex.js",
      "resume",
      "--yolo",
      UUID,
    ],
    "codex",
    UUID,
  ],
  ["codex exec resume", ["codex", "exec", "resume", "--json", "-m", UUID, "-"], "codex", UUID],
  ["codex fresh", ["codex"], "codex", undefined],
  ["pi renamed itself (arguments gone)", ["pi", "", "", ""], "pi", undefined],
  [
    "pi through node",
    ["node", "/usr/local/bin/pi", "--session", "/x/t1-a/pi-session.jsonl"],
    "pi",
    "/x/t1-a/pi-session.jsonl",
  ],
  ["pi node26", ["node26", "/opt/x/@mariozechner/pi-coding-agent/dist/cli.js"], "pi", undefined],
  ["opencode --session", ["opencode", "--session", SES], "opencode", SES],
  ["opencode -s", ["/usr/local/bin/opencode", "-s", SES], "opencode", SES],
  ["opencode .opencode", [".opencode", "--session=" + SES], "opencode", SES],
  ["opencode through bun", ["bun", "/x/opencode-ai/bin/opencode", "-s", SES], "opencode", SES],
  ["an editor", ["vim", "claude.md"], undefined, undefined],
  ["node running something else", ["node", "/srv/app.js", "--resume", UUID], undefined, undefined],
  ["a shell named like an argument", ["bash", "-c", "claude --resume x"], undefined, undefined],
  ["pip is not pi", ["pip", "install"], undefined, undefined],
];

Deno.test("agentOfArgv and resumedSession know the four agents' process shapes", () => {
  for (const [name, argv, agent, session] of SHAPES) {
    const got = agentOfArgv(argv);
    assert.equal(got?.agent, agent, name);
    if (got) assert.equal(resumedSession(got.agent, got.args), session, name);
  }
});

const CWD = "/home/agentuser/proj";
const TASKS = [
  task("t1-aaaa", "claude", UUID, CWD),
  task("t2-aaaa", "codex", UUID, "/home/agentuser/other"),
  task("t3-aaaa", "pi", "01a231e7-a8fb-7000-8000-000000000000", "/home/agentuser/pi"),
  task("t4-aaaa", "opencode", SES, "/srv/oc"),
].join("\n");

const CASES: Array<[string, string[], Record<string, number>]> = [
  ["nobody", [], {}],
  ["a delegated run carries the marker: not a person", [
    proc(50, ["claude", "-p", "--resume", UUID], { mark: "t1-aaaa", cwd: CWD }),
  ], {}],
  ["a person's claude resuming the session elsewhere", [
    proc(51, ["claude", "--resume", UUID], { cwd: "/tmp" }),
  ], { "t1-aaaa": 51 }],
  ["a person's claude in the task's cwd", [proc(52, ["claude"], { cwd: CWD })], {
    "t1-aaaa": 52,
  }],
  ["the join marker", [proc(53, ["claude"], { join: "t1-aaaa", cwd: "/" })], { "t1-aaaa": 53 }],
  ["another agent in the cwd is not this conversation", [
    proc(54, ["opencode"], { cwd: CWD }),
  ], {}],
  ["codex: launcher and native child, the older pid is named", [
    proc(61, [CODEX_NATIVE, "resume", UUID], { cwd: "/" }),
    proc(60, ["node", "/usr/local/bin/codex", "resume", UUID], { cwd: "/" }),
  ], { "t2-aaaa": 60 }],
  ["codex's app-server daemon in the cwd is no conversation", [
    proc(62, [CODEX_NATIVE, "app-server", "--listen", "unix://"], {
      cwd: "/home/agentuser/other",
    }),
  ], {}],
  ["pi renamed: found by its cwd", [proc(70, ["pi", "", ""], { cwd: "/home/agentuser/pi" })], {
    "t3-aaaa": 70,
  }],
  ["pi by the task's session file", [
    proc(71, [
      "node",
      "/usr/local/bin/pi",
      "--session",
      "/h/.isx-mcp/tasks/t3-aaaa/pi-session.jsonl",
    ], {
      cwd: "/",
    }),
  ], { "t3-aaaa": 71 }],
  ["pi by a session id prefix", [
    proc(72, ["node", "/usr/local/bin/pi", "--session", "01a231e7-a8fb"], { cwd: "/" }),
  ], { "t3-aaaa": 72 }],
  ["opencode by -s", [proc(80, ["opencode", "-s", SES], { cwd: "/" })], { "t4-aaaa": 80 }],
  ["a held join lock alone", ["presence lock t4-aaaa 99"], { "t4-aaaa": 99 }],
  ["a held lock with an unreadable pid", ["presence lock t1-aaaa -"], { "t1-aaaa": 0 }],
  ["a process beats the lock's pid", [
    "presence lock t1-aaaa 90",
    proc(91, ["claude", "--resume", UUID], { join: "t1-aaaa", cwd: CWD }),
  ], { "t1-aaaa": 91 }],
  ["garbage lines are dropped", [
    "presence proc x - - - -",
    "presence proc 5 - - !!! %%%",
    "presence lock ../x 5",
    "presence task T1 claude x -",
  ], {}],
];

Deno.test("attachedPids decides who is in which conversation (table)", () => {
  for (const [name, lines, want] of CASES) {
    const scan = parsePresence(`${TASKS}\n${lines.join("\n")}\n`);
    assert.deepEqual(Object.fromEntries(attachedPids(scan)), want, name);
  }
});

Deno.test("parsePresence re-validates what the guest printed", () => {
  const s = parsePresence(
    `presence task t1-a claude ${UUID} ${b64("/ok")}\n` +
      `presence task t2-a bogus -x ${b64("rel/path")}\n` +
      `${proc(7, ["claude"], { cwd: "/a\nb", mark: "BAD MARK" })}\n` +
      "other line\n",
  );
  assert.deepEqual(s.tasks, [
    { id: "t1-a", agent: "claude", session: UUID, cwd: "/ok" },
    { id: "t2-a" },
  ]);
  assert.equal(s.procs.length, 0, "a line with spaces in a field has the wrong field count");
  const s2 = parsePresence(`${proc(7, ["claude"], { cwd: "/a\nb" })}\n`);
  assert.deepEqual(s2.procs, [{ pid: 7, argv: ["claude"] }], "a cwd with a newline is dropped");
});

Deno.test("withPresence: finished becomes attached, running keeps running with the pid", () => {
  const rows: Array<[Parameters<typeof withPresence>, ReturnType<typeof withPresence>]> = [
    [[{ state: "finished", run: 2, exit_code: 0 }, 42], {
      state: "attached",
      run: 2,
      exit_code: 0,
      attached_pid: 42,
    }],
    [[{ state: "finished", run: 2, exit_code: 0 }, undefined], {
      state: "finished",
      run: 2,
      exit_code: 0,
    }],
    [[{ state: "running", run: 1 }, 42], { state: "running", run: 1, attached_pid: 42 }],
    [[{ state: "finished", run: 1 }, 0], { state: "attached", run: 1 }],
    [[{ state: "lost", run: 0 }, 42], { state: "lost", run: 0 }],
    [[{ state: "unknown", run: 1 }, 42], { state: "unknown", run: 1 }],
  ];
  for (const [args, want] of rows) assert.deepEqual(withPresence(...args), want);
});
