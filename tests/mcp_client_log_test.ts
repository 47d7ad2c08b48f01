/**
 * `isx mcp` records in `mcp.log`, per connection, which client connected (its name and
 * version) and which era it speaks: `initialize` with its protocol version, `server/discover`,
 * or stateless requests with no discover first (issue 19), so a user can see what their
 * client does. A process test on the raw stdio wire, without Incus; a hostile client name
 * cannot forge a line.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeHome, mcpCommand } from "./helpers/mcp.ts";
import { spawnProgram } from "./helpers/spawn.ts";

const MODERN = "2026-07-28";

/** Runs one `isx mcp` connection through `talk`, ends its input, returns its mcp.log lines. */
async function connection(
  talk: (p: ReturnType<typeof spawnProgram>) => Promise<void>,
): Promise<string[]> {
  const home = makeHome({ init: false });
  const { env } = mcpCommand(home);
  {
    await using p = spawnProgram(["mcp"], { env, prog: "isx", cwd: home.dir });
    await talk(p);
    await p.closeStdin();
    assert.equal((await p.wait(30_000)).code, 0, p.stderr());
  }
  const log = await Deno.readTextFile(`${home.stateDir}/mcp/mcp.log`).catch(() => "");
  return log.split("\n").filter((l) => l !== "");
}

const connectLines = (lines: string[]) => lines.filter((l) => / tool=connect /.test(l));

Deno.test("mcp.log names a handshake client, its version and protocol version", async () => {
  const lines = await connection(async (p) => {
    await p.send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "claude-code", version: "2.1.332" },
      },
    });
    await p.readJson();
    await p.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    await p.send({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} });
    await p.readJson();
  });
  const got = connectLines(lines);
  assert.equal(got.length, 1, lines.join("\n"));
  assert.match(
    got[0]!,
    /^\S+ session=\d+-\d+ tool=connect outcome=initialize ms=0 detail=client="claude-code" version="2\.1\.332" protocol="2025-06-18"$/,
  );
});

Deno.test("mcp.log names the stateless era: server/discover, or modern requests without it", async () => {
  const meta = (name: string) => ({
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": { name, version: "0.171.0" },
  });
  const discovered = await connection(async (p) => {
    await p.send({
      jsonrpc: "2.0",
      id: 1,
      method: "server/discover",
      params: { _meta: meta("codex-mcp-client") },
    });
    await p.readJson();
    for (const id of [2, 3]) {
      await p.send({
        jsonrpc: "2.0",
        id,
        method: "tools/list",
        params: { _meta: meta("codex-mcp-client") },
      });
      await p.readJson();
    }
  });
  const d = connectLines(discovered);
  assert.equal(d.length, 1, discovered.join("\n"));
  assert.match(
    d[0]!,
    / tool=connect outcome=server\/discover ms=0 detail=client="codex-mcp-client" version="0\.171\.0" protocol="2026-07-28"$/,
  );
  const bare = await connection(async (p) => {
    await p.send({ jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: meta("sdk") } });
    await p.readJson();
  });
  const b = connectLines(bare);
  assert.equal(b.length, 1, bare.join("\n"));
  assert.match(
    b[0]!,
    / outcome=stateless ms=0 detail=client="sdk" version="0\.171\.0" protocol="2026-07-28"$/,
  );
});

Deno.test("mcp.log keeps a hostile client name on its own line, quoted", async () => {
  const evil = 'x"\n2026-01-01T00:00:00+00:00 session=1-1 tool=destroy_instance outcome=destroyed';
  const lines = await connection(async (p) => {
    await p.send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: evil } },
    });
    await p.readJson();
    await p.send({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} });
    await p.readJson();
  });
  assert.equal(lines.length, 1, lines.join("\n"));
  assert.ok(!lines.some((l) => l.startsWith("2026-01-01")), lines.join("\n"));
  assert.match(lines[0]!, / tool=connect outcome=initialize ms=0 detail=client="x\\" *\\n2026/);
  assert.match(lines[0]!, / version="unknown" protocol="2025-11-25"$/);
});

Deno.test("mcp.log has the connect line even when the client kills the server right after tools/list", async () => {
  // Codex 0.171 ends its MCP servers outright when its run ends: the line cannot wait for the
  // session to load
  const home = makeHome({ init: false });
  const { env } = mcpCommand(home);
  {
    await using p = spawnProgram(["mcp"], { env, prog: "isx", cwd: home.dir });
    await p.send({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "codex-mcp-client", title: "Codex", version: "0.171.0" },
      },
    });
    await p.readJson();
    await p.send({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} });
    await p.readJson();
    p.child.kill("SIGKILL");
    await p.child.status;
  }
  const log = await Deno.readTextFile(`${home.stateDir}/mcp/mcp.log`).catch(() => "");
  assert.match(
    log,
    / tool=connect outcome=initialize ms=0 detail=client="codex-mcp-client" version="0\.171\.0" protocol="2025-06-18"\n$/,
  );
});
