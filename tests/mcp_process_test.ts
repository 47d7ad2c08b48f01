/**
 * `isx mcp` as a process, without Incus: protocol faults on the raw stdio wire (junk, batches,
 * duplicate ids, unknown methods, versions of both eras), then the current TypeScript SDK's
 * client in handshake and stateless mode: tools/list against the golden output schemas,
 * refusals with their codes, cancellation and ping during a call that hangs on a silent
 * Incus socket, and a clean end of input.
 *
 * @module
 */

import assert from "node:assert/strict";
import { outputSchemas, toolNames } from "../mcp/mod.ts";
import { call, connect, GOLDEN_PATH, makeHome, mcpCommand, refusal } from "./helpers/mcp.ts";
import { deadline, spawnProgram } from "./helpers/spawn.ts";

const TOOL_NAMES = [
  "list_templates",
  "create_instance",
  "list_instances",
  "adopt_instance",
  "start_instance",
  "stop_instance",
  "keep_instance",
  "destroy_instance",
  "exec",
  "delegate",
  "task_status",
  "wait_any",
  "task_result",
  "send_message",
  "cancel_task",
  "get_diff",
  "instance_activity",
];

Deno.test("the tools are the 17 of the spec and their output schemas are the golden file", () => {
  assert.deepEqual(toolNames().sort(), [...TOOL_NAMES].sort());
  const golden = JSON.parse(Deno.readTextFileSync(GOLDEN_PATH));
  assert.deepEqual(outputSchemas(), golden, "regenerate tests/golden/mcp_output_schemas.json");
  const closed = (s: unknown): void => {
    if (typeof s !== "object" || s === null) return;
    const o = s as Record<string, unknown>;
    if (o.type === "object") assert.equal(o.additionalProperties, false, JSON.stringify(o));
    for (const v of Object.values(o)) closed(v);
  };
  closed(golden);
});

function rawServer(home = makeHome()) {
  const { env } = mcpCommand(home);
  return spawnProgram(["mcp"], { env, prog: "isx", cwd: home.dir });
}

Deno.test("isx mcp answers protocol faults on the wire, one JSON line each", async () => {
  await using p = rawServer();
  await p.write("this is not json\n");
  assert.deepEqual((await p.readJson()).error, { code: -32700, message: "parse error: not JSON" });
  await p.write('[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n');
  const batch = await p.readJson();
  assert.equal(batch.id, null);
  assert.equal((batch.error as { code: number }).code, -32600);
  await p.write("42\n");
  assert.equal(((await p.readJson()).error as { code: number }).code, -32600);
  await p.send({ jsonrpc: "2.0", id: 2, method: "no/such" });
  assert.deepEqual(await p.readJson(), {
    jsonrpc: "2.0",
    id: 2,
    error: { code: -32601, message: "method not found: no/such" },
  });
  // notifications and stray responses get no answer; the next request is answered
  await p.send({ jsonrpc: "2.0", method: "notifications/initialized" });
  await p.send({ jsonrpc: "2.0", method: "no/such/notification" });
  await p.send({ jsonrpc: "2.0", id: 99, result: {} });
  await p.send({ jsonrpc: "2.0", id: 3, method: "ping" });
  assert.deepEqual(await p.readJson(), { jsonrpc: "2.0", id: 3, result: {} });
  await p.send({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "nope" } });
  assert.equal(((await p.readJson()).error as { code: number }).code, -32602);
  await p.send({
    jsonrpc: "2.0",
    id: 5,
    method: "tools/call",
    params: { name: "list_templates", arguments: [1] },
  });
  assert.equal(((await p.readJson()).error as { code: number }).code, -32602);
  await p.send({ jsonrpc: "2.0", id: 6, method: "prompts/get", params: { name: "nope" } });
  assert.equal(((await p.readJson()).error as { code: number }).code, -32602);
  await p.closeStdin();
  assert.equal(await p.readLine(), undefined);
  assert.equal((await p.wait()).code, 0);
});

Deno.test("initialize echoes a known version, falls back to the newest, and offers isx/task_changed", async () => {
  await using p = rawServer();
  for (const [asked, got] of [["2025-06-18", "2025-06-18"], ["1999-01-01", "2025-11-25"]]) {
    await p.send({
      jsonrpc: "2.0",
      id: asked,
      method: "initialize",
      params: { protocolVersion: asked, capabilities: {}, clientInfo: { name: "raw" } },
    });
    const r = (await p.readJson()).result as Record<string, unknown>;
    assert.equal(r.protocolVersion, got);
    assert.deepEqual((r.capabilities as Record<string, unknown>).experimental, {
      "isx/task_changed": {},
    });
    assert.match(String(r.instructions), /list_templates/);
    assert.equal("resultType" in r, false);
  }
  await p.send({ jsonrpc: "2.0", id: 7, method: "prompts/get", params: { name: "coordinate" } });
  const prompt = (await p.readJson()).result as { messages: { content: { text: string } }[] };
  assert.match(prompt.messages[0]!.content.text, /wait_any/);
});

Deno.test("stateless requests: server/discover, resultType, unsupported versions, duplicate ids", async () => {
  const home = makeHome();
  const silent = await silentSocket(home.dir);
  try {
    const { env } = mcpCommand(home, ["--socket", silent.path]);
    await using p = spawnProgram(["mcp", "--socket", silent.path], {
      env,
      prog: "isx",
      cwd: home.dir,
    });
    const meta = {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": {},
      "io.modelcontextprotocol/clientInfo": { name: "modern", version: "1" },
    };
    await p.send({ jsonrpc: "2.0", id: 1, method: "server/discover", params: { _meta: meta } });
    const d = (await p.readJson()).result as Record<string, unknown>;
    assert.equal(d.resultType, "complete");
    assert.ok((d.supportedVersions as string[]).includes("2026-07-28"));
    assert.deepEqual(d.serverInfo, {
      name: "isx",
      version: (d.serverInfo as { version: string }).version,
    });
    await p.send({ jsonrpc: "2.0", id: 2, method: "tools/list", params: { _meta: meta } });
    const tl = (await p.readJson()).result as { resultType: string; tools: unknown[] };
    assert.equal(tl.resultType, "complete");
    assert.equal(tl.tools.length, 17);
    const bad = { ...meta, "io.modelcontextprotocol/protocolVersion": "2099-01-01" };
    await p.send({ jsonrpc: "2.0", id: 3, method: "tools/list", params: { _meta: bad } });
    const e = (await p.readJson()).error as { code: number; data: { supported: string[] } };
    assert.equal(e.code, -32022);
    assert.ok(e.data.supported.includes("2026-07-28"));
    // a call that hangs on the silent socket; the same id again is refused while it runs
    const hang = { name: "list_templates", arguments: {}, _meta: { ...meta, progressToken: "p" } };
    Deno.writeTextFileSync(`${home.configDir}/mcp.yaml`, "templates: [tpl-minimal]\n");
    await p.send({ jsonrpc: "2.0", id: 10, method: "tools/call", params: hang });
    await p.send({ jsonrpc: "2.0", id: 10, method: "ping", params: { _meta: meta } });
    const dup = await p.readJson();
    assert.equal(dup.id, 10);
    assert.equal((dup.error as { code: number }).code, -32600);
    await p.send({ jsonrpc: "2.0", id: 11, method: "ping", params: { _meta: meta } });
    assert.deepEqual(await p.readJson(), {
      jsonrpc: "2.0",
      id: 11,
      result: { resultType: "complete" },
    });
    await p.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 10 } });
    await p.send({ jsonrpc: "2.0", id: 12, method: "ping", params: { _meta: meta } });
    // the cancelled call's answer never comes: the next line answers the ping
    const next = await p.readJson();
    assert.equal(next.id, 12);
    // subscriptions/listen: a task filter is acknowledged as asked and stays open; no filter
    // is acknowledged empty and answered at once; a cancelled listen is closed
    const f = { "dev.incusspawn/taskChanged": { instances: ["a"], taskIds: ["t1-abcd"] } };
    await p.send({
      jsonrpc: "2.0",
      id: "L1",
      method: "subscriptions/listen",
      params: { notifications: f, _meta: meta },
    });
    assert.deepEqual(await p.readJson(), {
      jsonrpc: "2.0",
      method: "notifications/subscriptions/acknowledged",
      params: { notifications: f, _meta: { "io.modelcontextprotocol/subscriptionId": "L1" } },
    });
    await p.send({
      jsonrpc: "2.0",
      id: "L2",
      method: "subscriptions/listen",
      params: { notifications: { toolsListChanged: true }, _meta: meta },
    });
    assert.deepEqual((await p.readJson()).params, {
      notifications: {},
      _meta: { "io.modelcontextprotocol/subscriptionId": "L2" },
    });
    assert.equal((await p.readJson()).id, "L2");
    await p.send({ jsonrpc: "2.0", id: "L1", method: "ping", params: { _meta: meta } });
    assert.equal(((await p.readJson()).error as { code: number }).code, -32600, "L1 is still open");
    await p.send({
      jsonrpc: "2.0",
      method: "notifications/cancelled",
      params: { requestId: "L1" },
    });
    await p.send({ jsonrpc: "2.0", id: "L1", method: "ping", params: { _meta: meta } });
    assert.deepEqual(await p.readJson(), {
      jsonrpc: "2.0",
      id: "L1",
      result: { resultType: "complete" },
    });
    await p.closeStdin();
    assert.equal(await p.readLine(), undefined);
    assert.equal((await p.wait()).code, 0);
  } finally {
    silent.close();
  }
});

/** A unix socket that accepts and never answers: every Incus call hangs. */
async function silentSocket(dir: string) {
  const path = `${dir}/silent.sock`;
  const l = Deno.listen({ transport: "unix", path });
  const conns: Deno.Conn[] = [];
  const loop = (async () => {
    try {
      for await (const c of l) conns.push(c);
    } catch { /* closed */ }
  })();
  await Promise.resolve();
  return {
    path,
    close() {
      l.close();
      for (const c of conns) c.close();
      return loop;
    },
  };
}

for (const mode of ["legacy", "modern"] as const) {
  Deno.test(`the SDK client (${mode}) lists the tools and gets refusals with their codes`, async () => {
    const home = makeHome({ mcp: "templates: []\n" });
    const client = await connect(home, mode);
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort());
      const exec = tools.find((t) => t.name === "exec")!;
      // the 2026 client reads task support from the tasks extension, not per tool
      if (mode === "legacy") assert.equal(exec.execution?.taskSupport, "optional");
      assert.deepEqual(exec.annotations, {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: false,
      });
      const lt = await call(client, "list_templates");
      assert.deepEqual(lt.structuredContent, {
        templates: [],
        max_instances: 8,
        max_concurrent_tasks: 8,
        orphan_grace_hours: 24,
      });
      const mistyped = await call(client, "exec", { instance: 5, command: "true" });
      assert.equal(refusal(mistyped), "invalid_argument");
      const turns = await call(client, "delegate", {
        instruction: "x",
        template: "t",
        max_turns: 3,
      });
      assert.equal(refusal(turns), "invalid_argument");
      const del = await call(client, "delegate", { instruction: "x", template: "t" });
      assert.equal(refusal(del), "not_approved", "delegation checks the template like create");
      const noTask = await call(client, "task_status", { task_id: "t1-aaaa" });
      assert.equal(refusal(noTask), "not_found");
      assert.deepEqual((noTask._meta as Record<string, unknown>)["dev.incusspawn/error"], {
        code: "not_found",
        message: (noTask.content as { text: string }[])[0]!.text,
        task_id: "t1-aaaa",
      });
      const notApproved = await call(client, "create_instance", { template: "tpl-minimal" });
      assert.equal(refusal(notApproved), "not_approved");
      await assert.rejects(
        client.callTool({ name: "no_such_tool", arguments: {} }),
        /-32602|unknown tool/,
      );
    } finally {
      await client.close();
    }
  });
}

Deno.test("every tool refuses with refused before isx init, checked per call", async () => {
  const home = makeHome({ init: false });
  const client = await connect(home, "legacy");
  try {
    assert.equal(refusal(await call(client, "list_templates")), "refused");
    Deno.writeTextFileSync(`${home.configDir}/config.yaml`, "proxy: {}\n");
    assert.equal(refusal(await call(client, "list_templates")), undefined);
    const log = await deadline(Deno.readTextFile(`${home.stateDir}/mcp/mcp.log`), 5000, "log");
    assert.match(log, /tool=list_templates outcome=failed: refused/);
    assert.match(log, /tool=list_templates outcome=ok/);
  } finally {
    await client.close();
  }
});
