/**
 * `isx branch|list|start|stop|destroy|shell`: instances of built templates. `shell` owns
 * the terminal: raw mode, the title, resizes, and the exec's streams over the Incus
 * websocket (no `incus` binary).
 *
 * @module
 */

import {
  branchDefaults,
  branchInstance,
  destroyIsxInstance,
  formatTable,
  listIsxInstances,
  loadDefinitions,
  NAME_RE,
  type NetworkMode,
  readHostConfig,
  shellExec,
  SLOW_DAEMON_MS,
  startIsxInstance,
  stopIsxInstance,
} from "../mcp/mod.ts";
import { loadProxyConfig, parseAccountPairs } from "../proxy/mod.ts";
import {
  createIncusClient,
  type ExecOptions,
  type ExecSession,
  type IncusClient,
  IsbError,
} from "../rpc/mod.ts";
import { parseCommandArgs, UsageError } from "./args.ts";
import type { CliContext, Command } from "./command.ts";

function out(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

async function withClient(
  ctx: CliContext,
  fn: (c: IncusClient) => Promise<number>,
): Promise<number> {
  const client = createIncusClient({
    socket: ctx.global.socket,
    project: ctx.global.project ?? "",
    timeouts: { requestMs: SLOW_DAEMON_MS },
  });
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

function names(positionals: string[], min = 1): string[] {
  if (positionals.length < min) throw new UsageError("name an instance");
  for (const n of positionals) {
    if (!NAME_RE.test(n)) throw new UsageError(`"${n}" is not an instance name`);
  }
  return positionals;
}

const NETWORKS = ["full", "proxy-only", "airgap"];

/** `isx branch`. */
export const branchCommand: Command = {
  name: "branch",
  progs: ["isx"],
  summary: "make a running copy-on-write instance of a built template",
  help: `Usage: isx branch <name> --from <template> [--network full|proxy-only|airgap]
                  [--account NS=NAME ...] [--json]

Copies a built template (copy-on-write), starts it with a fresh instance secret and
waits for its address. The network mode and resource limits come from the template's
definition unless --network is given:
  full        the bridge, like any instance
  proxy-only  on isx's proxy-only bridge (isxproxy0, made when missing): only the
              isx proxy (443, 3128) and DNS on its gateway, nothing else
  airgap      no network device at all

Options:
  --from TEMPLATE   the built template to copy (required)
  --network MODE    override the template's network mode
  --account NS=NAME pin the proxy account of a namespace (claude, openai, github; may
                    repeat); see isx proxy account --help
  --json            print the result as JSON`,
  mode: () => "instances",
  run(rest, ctx) {
    const { values, positionals } = parseCommandArgs(rest, {
      from: { type: "string" },
      network: { type: "string" },
      account: { type: "string", multiple: true },
      json: { type: "boolean" },
    });
    let accounts: Record<string, string> = {};
    try {
      accounts = parseAccountPairs(values.account ?? []);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    const [name] = names(positionals);
    if (positionals.length > 1) throw new UsageError("branch makes one instance");
    if (!values.from) throw new UsageError("--from <template> is required");
    if (values.network !== undefined && !NETWORKS.includes(values.network)) {
      throw new UsageError(`--network must be one of ${NETWORKS.join(", ")}`);
    }
    return withClient(ctx, async (client) => {
      const { configDir, cwd, home } = ctx.perm;
      const host = readHostConfig(configDir, home);
      const defs = loadDefinitions({ configDir, searchPaths: host.searchPaths, cwd });
      const d = branchDefaults(defs, values.from!);
      const proxy = await loadProxyConfig(`${configDir}/config.yaml`);
      const r = await branchInstance(client, {
        name: name!,
        template: values.from!,
        proxy: {
          bridge: proxy.bridge,
          proxyOnlyBridge: proxy.proxy_only_bridge,
          subnets: proxy.proxy_only_subnets,
          ports: { tls: proxy.ports.tls, forward: proxy.ports.forward },
        },
        network: (values.network as NetworkMode | undefined) ?? d.network ?? "full",
        ...(d.limits ? { limits: d.limits } : {}),
        accounts,
      });
      if (values.json) out(JSON.stringify(r));
      else {
        out(
          `${r.name}: branched from ${r.template} in ${(r.ms / 1000).toFixed(2)} s, ` +
            `${r.ip ?? "no address"} (network ${r.network}); isx shell ${r.name}`,
        );
      }
      return 0;
    });
  },
};

/** `isx list`. */
export const listCommand: Command = {
  name: "list",
  progs: ["isx"],
  summary: "list templates and instances made by isx",
  help: `Usage: isx list [--json]

Lists every template, build instance and instance isx made, with status, template,
IPv4 address and network mode. Records end with mcp_state (held, orphaned, kept or
null) and mcp_purpose; the table shows an MCP column only when an instance has MCP stamps.

Options:
  --json   one JSON array of records instead of the table`,
  mode: () => "instances",
  run(rest, ctx) {
    const { values } = parseCommandArgs(rest, { json: { type: "boolean" } }, false);
    return withClient(ctx, async (client) => {
      const rows = await listIsxInstances(client);
      if (values.json) out(JSON.stringify(rows, null, 2));
      else {out(
          rows.length ? formatTable(rows) : "No templates or instances yet (isx build tpl-minimal)",
        );}
      return 0;
    });
  },
};

function lifecycle(
  name: "start" | "stop" | "destroy",
  summary: string,
  help: string,
  act: (c: IncusClient, n: string, force: boolean) => Promise<string>,
): Command {
  return {
    name,
    progs: ["isx"],
    summary,
    help: `Usage: isx ${name} [--force] <name>...\n\n${help}\n\nOptions:\n  --force   ` +
      "also act on instances isx did not make",
    mode: () => "instances",
    run(rest, ctx) {
      const { values, positionals } = parseCommandArgs(rest, { force: { type: "boolean" } });
      return withClient(ctx, async (client) => {
        for (const n of names(positionals)) out(await act(client, n, values.force ?? false));
        return 0;
      });
    },
  };
}

/** `isx start`. */
export const startCommand = lifecycle(
  "start",
  "start instances (each start gets a fresh instance secret)",
  "Starts instances; every start writes a fresh random secret to /run/isx/instance-secret\n" +
    "(readable by agentuser only) and records its hash on the instance.",
  async (c, n, force) => {
    const r = await startIsxInstance(c, n, { force });
    return `${n}: ${r.alreadyRunning ? "already running" : "started"}${r.ip ? ` at ${r.ip}` : ""}`;
  },
);

/** `isx stop`. */
export const stopCommand = lifecycle(
  "stop",
  "stop instances",
  "Stops instances cleanly (forcibly after 15 s).",
  async (c, n, force) =>
    `${n}: ${(await stopIsxInstance(c, n, { force })) ? "stopped" : "already stopped"}`,
);

/** `isx destroy`. */
export const destroyCommand = lifecycle(
  "destroy",
  "delete instances (or templates, or failed builds)",
  "Deletes instances, stopping them first. Works on templates and kept failed builds too.",
  async (c, n, force) => {
    await destroyIsxInstance(c, n, { force });
    return `${n}: destroyed`;
  },
);

/** Opens the exec; a failed websocket upgrade means the shell never started, so retry. */
async function openSession(
  client: IncusClient,
  name: string,
  exec: ExecOptions,
): Promise<ExecSession> {
  for (let attempt = 1;; attempt++) {
    try {
      return await client.exec(name, exec);
    } catch (e) {
      if (!(e instanceof IsbError) || !/websocket/.test(e.message) || attempt >= 3) throw e;
    }
  }
}

async function interact(client: IncusClient, name: string, ctx: CliContext): Promise<number> {
  const tty = Deno.stdin.isTerminal() && Deno.stdout.isTerminal();
  const size = tty ? Deno.consoleSize() : { columns: 80, rows: 24 };
  const { exec, title } = await shellExec(client, name, {
    width: size.columns,
    height: size.rows,
    term: ctx.env.TERM ?? "",
  });
  const session = await openSession(client, name, exec);
  const enc = new TextEncoder();
  if (Deno.stdout.isTerminal()) Deno.stdout.writeSync(enc.encode(`\x1b]0;${title}\x07`));
  if (tty) Deno.stdin.setRaw(true);
  const onResize = () => {
    const s = Deno.consoleSize();
    session.resize(s.columns, s.rows).catch(() => {});
  };
  if (tty) Deno.addSignalListener("SIGWINCH", onResize);
  const reader = Deno.stdin.readable.getReader();
  const input = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        await session.write(value);
      }
      await session.closeStdin();
    } catch { /* the session ended first */ }
  })();
  try {
    await session.stdout.pipeTo(Deno.stdout.writable, { preventClose: true });
    return await session.exit;
  } finally {
    if (tty) {
      Deno.removeSignalListener("SIGWINCH", onResize);
      Deno.stdin.setRaw(false);
    }
    session.close();
    reader.releaseLock();
    void input;
  }
}

/** `isx shell`. */
export const shellCommand: Command = {
  name: "shell",
  progs: ["isx"],
  summary: "open a login shell as agentuser in an instance",
  help: `Usage: isx shell <name>

Opens an interactive login shell as agentuser in the instance's working directory
(its template's workdir), with the terminal title set to the instance's name. A
stopped instance is started first (with a fresh instance secret). Exits with the
shell's exit status.`,
  mode: () => "instances",
  run(rest, ctx) {
    const { positionals } = parseCommandArgs(rest, {});
    const [name] = names(positionals);
    return withClient(ctx, async (client) => {
      // the instance record carries the status; /state would also gather addresses (slow)
      const { value } = await client.getInstance(name!);
      if (value.status === "Stopped") await startIsxInstance(client, name!, {});
      return await interact(client, name!, ctx);
    });
  },
};

/** Every instance command, in help order. */
export const INSTANCE_COMMANDS: readonly Command[] = [
  branchCommand,
  listCommand,
  startCommand,
  stopCommand,
  destroyCommand,
  shellCommand,
];
