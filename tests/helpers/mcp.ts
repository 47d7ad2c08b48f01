/**
 * Driving `isx mcp` in tests: a throwaway HOME (config with approved templates, state dir),
 * the current TypeScript SDK's `Client` over stdio against the real program started with
 * the permission table's flags, in handshake (`legacy`) or stateless (`2026-07-28`) mode,
 * and the golden output schemas with a real JSON Schema 2020-12 validator (ajv) that every
 * result a test sees is checked against.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import Ajv2020 from "ajv/dist/2020.js";
import { activeLab, labProxyYaml } from "./lab.ts";
import { programArgs, type ProgramHandle, ROOT, spawnProgram } from "./spawn.ts";

/** A throwaway user: HOME and XDG dirs under one temp directory. */
export interface McpHome {
  /** The temp root. */
  dir: string;
  /** Environment for the program. */
  env: Record<string, string>;
  /** The isx config directory. */
  configDir: string;
  /** The isx state directory. */
  stateDir: string;
}

const homes: string[] = [];
// every throwaway HOME goes when the test process ends
globalThis.addEventListener("unload", () => {
  for (const d of homes) {
    try {
      Deno.removeSync(d, { recursive: true });
    } catch { /* already gone */ }
  }
});

/** Makes a HOME; `init` writes config.yaml (isx init done), `mcp` the mcp.yaml text. */
export function makeHome(opts: { init?: boolean; mcp?: string } = {}): McpHome {
  const dir = Deno.makeTempDirSync({ prefix: "isx-mcp-test-" });
  homes.push(dir);
  const configDir = `${dir}/config/isx`;
  const stateDir = `${dir}/state/isx`;
  Deno.mkdirSync(configDir, { recursive: true });
  Deno.mkdirSync(stateDir, { recursive: true });
  // the lab's bridges (tests/helpers/lab.ts), and an ops port nothing answers on:
  // preflight and activity see no proxy
  if (opts.init ?? true) {
    Deno.writeTextFileSync(`${configDir}/config.yaml`, labProxyYaml());
  }
  if (opts.mcp !== undefined) Deno.writeTextFileSync(`${configDir}/mcp.yaml`, opts.mcp);
  return {
    dir,
    configDir,
    stateDir,
    env: {
      HOME: dir,
      XDG_CONFIG_HOME: `${dir}/config`,
      XDG_STATE_HOME: `${dir}/state`,
      XDG_CACHE_HOME: `${dir}/cache`,
      XDG_RUNTIME_DIR: "",
      ISX_PROG: "isx",
      NO_COLOR: "1",
      // a live test's lab project (tests/helpers/lab.ts), also where the env is written out
      // for a shell of its own (tmux)
      ...(activeLab() ? { INCUS_PROJECT: activeLab()!.project } : {}),
      // the child's HOME moves; its module cache stays where this test's is
      DENO_DIR: Deno.env.get("DENO_DIR") ||
        `${Deno.env.get("XDG_CACHE_HOME") || `${Deno.env.get("HOME")}/.cache`}/deno`,
    },
  };
}

/** The env and argv that start `isx mcp` exactly as the launchers do. */
export function mcpCommand(
  home: McpHome,
  extra: string[] = [],
): { args: string[]; env: Record<string, string> } {
  const env = { ...Deno.env.toObject(), ...home.env };
  return { args: programArgs(["mcp", ...extra], { env, prog: "isx", cwd: home.dir }), env };
}

/**
 * A fresh `isx mcp` spoken to line by line, past `initialize` (handshake era): for tests that
 * signal or kill the server mid-call, which an SDK client would not survive.
 */
export async function rawServer(
  home: McpHome,
  client: string,
  extra: string[] = [],
): Promise<ProgramHandle> {
  const { env } = mcpCommand(home);
  const p = spawnProgram(["mcp", ...extra], { env, prog: "isx", cwd: home.dir });
  try {
    await p.send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: client } },
    });
    await p.readJson();
    return p;
  } catch (e) {
    await p[Symbol.asyncDispose]();
    throw e;
  }
}

/** An SDK client connected to a fresh `isx mcp` (live tests: `extra: ["--no-preflight"]`). */
export async function connect(
  home: McpHome,
  mode: "legacy" | "modern",
  opts: { experimental?: boolean; extra?: string[] } = {},
): Promise<Client> {
  const { args, env } = mcpCommand(home, opts.extra);
  const transport = new StdioClientTransport({
    command: Deno.execPath(),
    args,
    env,
    cwd: home.dir,
    stderr: "pipe",
  });
  // the server's log goes on to ours; a rejection nothing handled (which the server survives
  // and logs) fails the test at close
  const stray: string[] = [];
  transport.stderr?.on("data", (chunk: Uint8Array) => {
    Deno.stderr.writeSync(chunk);
    const text = new TextDecoder().decode(chunk);
    if (text.includes("unhandled rejection")) stray.push(text.trim());
  });
  const client = new Client({ name: "isx-test", version: "1.0.0" }, {
    capabilities: opts.experimental ? { experimental: { "isx/task_changed": {} } } : {},
    versionNegotiation: { mode: mode === "legacy" ? "legacy" : { pin: "2026-07-28" } },
  });
  await client.connect(transport);
  const close = client.close.bind(client);
  client.close = async () => {
    await close();
    if (stray.length) {
      throw new Error(`isx mcp logged an unhandled rejection:\n${stray.join("\n")}`);
    }
  };
  return client;
}

/** The golden output schemas. */
export const GOLDEN_PATH = `${ROOT}/tests/golden/mcp_output_schemas.json`;

let validators: Map<string, (v: unknown) => boolean> | undefined;
let ajvErrors: () => string = () => "";

/** Asserts a tool result: success validates against the golden schema, refusal has no structure. */
export function checkResult(tool: string, result: Record<string, unknown>): void {
  if (!validators) {
    const golden = JSON.parse(Deno.readTextFileSync(GOLDEN_PATH)) as Record<string, object>;
    const ajv = new Ajv2020.default({ strict: false, allErrors: true });
    validators = new Map(Object.entries(golden).map(([k, s]) => [k, ajv.compile(s)]));
    ajvErrors = () => ajv.errorsText();
  }
  if (result.isError) {
    assert.equal(result.structuredContent, undefined, `${tool}: a refusal carries no structure`);
    const meta = (result._meta as Record<string, Record<string, unknown>>)
      ?.["dev.incusspawn/error"];
    assert.ok(meta && typeof meta.code === "string", `${tool}: a refusal carries its code`);
    for (const k of Object.keys(meta)) {
      assert.ok(["code", "message", "instance", "task_id"].includes(k), `${tool}: _meta key ${k}`);
    }
    return;
  }
  const v = validators.get(tool);
  assert.ok(v, `no golden schema for ${tool}`);
  const ok = v(result.structuredContent);
  const validate = v as unknown as { errors?: unknown };
  assert.ok(
    ok,
    `${tool}: result does not match the golden schema: ${
      JSON.stringify(validate.errors)
    } ${ajvErrors()}`,
  );
}

/** Calls a tool through the SDK and checks the result against the golden file. */
export async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
  opts: { timeout?: number } = {},
): Promise<Record<string, unknown>> {
  const r = await client.callTool({ name, arguments: args }, {
    timeout: opts.timeout ?? 600_000,
  }) as Record<string, unknown>;
  checkResult(name, r);
  return r;
}

/** The refusal code of a result, or undefined on success. */
export function refusal(r: Record<string, unknown>): string | undefined {
  if (!r.isError) return undefined;
  return ((r._meta as Record<string, Record<string, string>>)["dev.incusspawn/error"]!).code;
}

/** Waits (`task_status` with `wait_seconds`, up to 8 minutes) until a task is no longer `running`. */
export async function settle(client: Client, task: string): Promise<Record<string, unknown>> {
  for (let i = 0; i < 4; i++) {
    const r = await call(client, "task_status", { task_id: task, wait_seconds: 120 });
    assert.equal(refusal(r), undefined, (r.content as { text: string }[])[0]?.text);
    const st = r.structuredContent as Record<string, unknown>;
    if (st.state !== "running") return st;
  }
  throw new Error(`task ${task} still running`);
}

/** `list_templates`' entry for `template` (the call is checked against the golden file). */
export async function templateEntry(
  client: Client,
  template: string,
): Promise<Record<string, unknown>> {
  const r = await call(client, "list_templates");
  const all = (r.structuredContent as { templates: Record<string, unknown>[] }).templates;
  const t = all.find((x) => x.template === template);
  assert.ok(t, `list_templates has no ${template}`);
  return t;
}
