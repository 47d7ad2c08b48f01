/**
 * The README's main job, second half: drive `bin/isx mcp` as a program would, printing every
 * protocol line (`->` sent, `<-` received): initialize with task-change notifications,
 * list_templates, create_instance with an idempotency key, exec, a background task whose
 * `finished` notification arrives, the repeated create answering `replayed: true`, and
 * destroy_instance. Talks only the wire protocol, so it doubles as a worked example for
 * programs. Imports nothing. Extra arguments go to `isx mcp` (e.g. `--no-preflight`).
 *
 * @module
 */

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const TEMPLATE = Deno.env.get("ISX_DEMO_TEMPLATE") ?? "tpl-minimal";
const enc = new TextEncoder();
const short = (line: string) => (line.length > 400 ? line.slice(0, 400) + " …" : line);
const out = (s: string) => Deno.stdout.writeSync(enc.encode(s + "\n"));

const child = new Deno.Command(`${ROOT}/bin/isx`, {
  args: ["mcp", ...Deno.args],
  stdin: "piped",
  stdout: "piped",
  stderr: "inherit",
}).spawn();
const writer = child.stdin.getWriter();
const waiting = new Map<number, (msg: Record<string, unknown>) => void>();
const changes: Record<string, unknown>[] = [];
let changed: () => void = () => {};
let nextId = 1;

(async () => {
  let buf = "";
  for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      out(`<- ${short(line)}`);
      const msg = JSON.parse(line);
      if (msg.method === "notifications/isx/task_changed") {
        changes.push(msg.params);
        changed();
      }
      if ("result" in msg || "error" in msg) waiting.get(msg.id)?.(msg);
    }
  }
})();

async function send(method: string, params: Record<string, unknown>) {
  const id = nextId++;
  const line = JSON.stringify({ jsonrpc: "2.0", id, method, params });
  out(`-> ${short(line)}`);
  const reply = new Promise<Record<string, unknown>>((r) => waiting.set(id, r));
  await writer.write(enc.encode(line + "\n"));
  const msg = await reply;
  if (msg.error) throw new Error(`${method} failed: ${JSON.stringify(msg.error)}`);
  return msg.result as Record<string, unknown>;
}

/** Calls a tool; a refusal (isError) ends the demo with its code and message. */
async function tool(name: string, args: Record<string, unknown> = {}) {
  const r = await send("tools/call", { name, arguments: args });
  if (r.isError) {
    const e =
      (r._meta as Record<string, { code: string; message: string }>)["dev.incusspawn/error"]!;
    throw new Error(`${name} refused (${e.code}): ${e.message}`);
  }
  return r.structuredContent as Record<string, unknown>;
}

function finished(taskId: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no finished notification for ${taskId}`)),
      60_000,
    );
    const look = () => {
      const c = changes.find((x) => x.task_id === taskId && x.state === "finished");
      if (!c) return;
      clearTimeout(timer);
      resolve(c);
    };
    changed = look;
    look();
  });
}

let failed = false;
let instance: string | undefined;
try {
  await send("initialize", {
    protocolVersion: "2025-11-25",
    capabilities: { experimental: { "isx/task_changed": {} } },
    clientInfo: { name: "isx-demo", version: "1" },
  });
  await writer.write(enc.encode('{"jsonrpc":"2.0","method":"notifications/initialized"}\n'));
  const templates = await tool("list_templates");
  out(
    `   approved: ${
      JSON.stringify((templates.templates as { template: string }[]).map((t) => t.template))
    }`,
  );
  const key = `demo-${new Date().toISOString().slice(0, 10)}`;
  const made = await tool("create_instance", {
    template: TEMPLATE,
    name_hint: "demo",
    purpose: "the isx mcp demo",
    idempotency_key: key,
  });
  instance = String(made.instance);
  const r = await tool("exec", { instance, command: "uname -sr; id -un" });
  out(`   exec: ${JSON.stringify(r.stdout)}, exit ${r.exit_code}`);
  const bg = await tool("exec", {
    instance,
    command: "for i in 1 2 3; do echo step $i; sleep 1; done; exit 3",
    background: true,
  });
  const fin = await finished(String(bg.task_id));
  out(`   ${bg.task_id} finished with exit_code ${fin.exit_code} (notification)`);
  const result = await tool("task_result", { task_id: bg.task_id });
  out(`   its output: ${JSON.stringify(result.stdout)}`);
  const again = await tool("create_instance", { template: TEMPLATE, idempotency_key: key });
  out(`   the same key again: ${again.instance}, replayed: ${again.replayed}`);
} catch (e) {
  failed = true;
  out(`demo failed: ${(e as Error).message}`);
} finally {
  if (instance) await tool("destroy_instance", { instance }).catch(() => undefined);
  await writer.close();
  const status = await child.status;
  out(`isx mcp exited with ${status.code}`);
}
Deno.exit(failed ? 1 : 0);
