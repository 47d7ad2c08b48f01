/**
 * A coordinator in an instance (issue 20, seed 002) on real Incus: the real proxy (in this
 * process, on a bridge of this test's own, with its own CA, serving
 * `https://mcp.isx.internal/mcp` on the gateway's port 443 and the name in the bridge's
 * DNS), the real `isx mcp --caller-instance` child it starts (its own isx home, the mcp
 * mode's flags from cli/mcp_child.ts), and `curl` inside real containers. The coordinator
 * drives the whole flow over HTTP: initialize, tools/list (17), create_instance from the
 * approved template, exec in the worker, an event-stream answer, list_instances after the
 * connection was killed mid-call, and after the proxy restarted, destroy. Refused, from
 * inside containers: a plain pinned instance, a copy of the coordinator, another instance
 * presenting the coordinator's secret, the host's own address, and a coordinator asking
 * create_instance for a coordinator. Everything it makes is named `t-coord-…`,
 * `icoord…` (the bridge) or `mcp-minimal-coord…` (workers) and removed at the end.
 *
 * @module
 */

import { hasCode } from "../../rpc/base.ts";
import assert from "node:assert/strict";
import { type IncusClient } from "../../rpc/mod.ts";
import { copyConfig, execRecorded, readStamps } from "../../mcp/mod.ts";
import { pickAddress, pinnedNic, takenAddresses } from "../../mcp/instances/static_ip.ts";
import { newGrant } from "../../mcp/instances/caller_grant.ts";
import {
  ClientRegistry,
  incusSource,
  loadCa,
  MCP_HOST,
  Policy,
  startProxy,
} from "../../proxy/mod.ts";
import { emptyCredentials } from "../../proxy/config/credentials.ts";
import { applyDns } from "../../proxy/host/dns.ts";
import { sha256Hex } from "../../rpc/base.ts";
import { contextFrom } from "../../cli/permissions.ts";
import { mcpChildSpec } from "../../cli/mcp_child.ts";
import type { CliContext } from "../../cli/command.ts";
import {
  LIVE_PROJECT,
  LIVE_SOCKET,
  liveIncus,
  NO_INCUS,
  removeInstance,
  testName,
  until,
} from "../helpers/live.ts";
import { ensureBuilt } from "../helpers/built.ts";
import { ensureTemplate } from "../helpers/agents_lab.ts";
import { launchPinned, TRUSTED_STAMPS } from "./_pinned.ts";
import { makeHome } from "../helpers/mcp.ts";
import { ROOT } from "../helpers/spawn.ts";

const TEMPLATE = "tpl-minimal";
// built in this run's lab (tests/helpers/built.ts)
if (!NO_INCUS) await ensureBuilt(TEMPLATE);
// its list_templates step names tpl-agents' coordinating agents
if (!NO_INCUS) await ensureTemplate();
const CA = "/usr/local/share/ca-certificates/isx-coord-test.crt";
const IMAGE = "dev-base"; // curl and ca-certificates (scripts/host-setup.sh)

type Json = Record<string, unknown>;

/** One HTTP exchange with the endpoint, run by curl inside `name`. */
interface Reply {
  /** curl's exit code (28: it gave up at --max-time). */
  rc: number;
  status: number;
  headers: Record<string, string>;
  body: string;
  json?: Json;
}

async function curl(
  incus: IncusClient,
  name: string,
  o: {
    body?: Json;
    session?: string;
    secret?: "own" | string;
    accept?: string;
    method?: string;
    maxTime?: number;
    /** curl runs in the background with its pid in this file (the test kills it there). */
    pidFile?: string;
  } = {},
): Promise<Reply> {
  const secret = o.secret === undefined || o.secret === "own"
    ? `-H "X-Isx-Instance-Secret: $(cat /run/isx/instance-secret)"`
    : o.secret === ""
    ? ""
    : `-H "X-Isx-Instance-Secret: $SECRET"`;
  const script = [
    "curl -sS -o /tmp/body -D /tmp/head",
    o.maxTime ? `--max-time ${o.maxTime}` : "--max-time 120",
    `-X ${o.method ?? "POST"}`,
    secret,
    `-H "accept: ${o.accept ?? "application/json, text/event-stream"}"`,
    o.session ? `-H "mcp-session-id: ${o.session}"` : "",
    o.body ? `-H "content-type: application/json" --data-binary "$BODY"` : "",
    `https://${MCP_HOST}/mcp`,
    o.pidFile ? `& echo $! >${o.pidFile}; wait $!;` : ";",
    `echo "rc=$?" >&2; cat /tmp/head; echo; cat /tmp/body`,
  ].join(" ");
  const r = await execRecorded(incus, name, ["bash", "-c", script], {
    step: "curl the endpoint",
    env: {
      BODY: JSON.stringify(o.body ?? {}),
      ...(o.secret && o.secret !== "own" ? { SECRET: o.secret } : {}),
    },
  });
  const [head, ...rest] = r.stdout.split("\r\n\r\n");
  const lines = (head ?? "").split("\r\n");
  const status = Number(/^HTTP\/\S+ (\d+)/.exec(lines[0] ?? "")?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(":");
    if (i > 0) headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
  }
  const body = rest.join("\r\n\r\n").replace(/^\n/, "");
  let json: Json | undefined;
  if ((headers["content-type"] ?? "").includes("application/json")) json = JSON.parse(body);
  if ((headers["content-type"] ?? "").includes("text/event-stream")) {
    const data = body.split("\n").filter((l) => l.startsWith("data: ")).map((l) =>
      JSON.parse(l.slice(6))
    );
    json = data.find((d) => "result" in d || "error" in d);
  }
  // curl's own complaint, when there was no answer
  const text = status ? body : `${body}${r.stderr}`;
  const rc = Number(/rc=(\d+)/.exec(r.stderr)?.[1] ?? -1);
  return { rc, status, headers, body: text, ...(json ? { json } : {}) };
}

let nextId = 1;
function rpc(method: string, params: Json = {}): Json {
  return { jsonrpc: "2.0", id: nextId++, method, params };
}
const INIT = () =>
  rpc("initialize", {
    protocolVersion: "2025-11-25",
    capabilities: {},
    clientInfo: { name: "coord-curl", version: "1" },
  });
const callTool = (name: string, args: Json = {}) => rpc("tools/call", { name, arguments: args });
const sc = (r: Reply) => (r.json!.result as Json).structuredContent as Json;
const refusalCode = (r: Reply) =>
  (((r.json!.result as Json)._meta as Json | undefined)?.["dev.incusspawn/error"] as
    | Json
    | undefined)
    ?.code;

async function makeBridge(incus: IncusClient): Promise<{ name: string; gateway: string }> {
  const name = `icoord${crypto.randomUUID().slice(0, 6)}`;
  const used = new Set(
    (await incus.call("GET", "/1.0/networks", { query: { recursion: 1 } }).then((r) =>
      r.kind === "sync" ? r.metadata as { config?: Record<string, string> }[] : []
    )).map((n) => n.config?.["ipv4.address"]?.split(".").slice(0, 3).join(".")),
  );
  let subnet = "";
  do subnet = `10.${200 + Math.floor(Math.random() * 50)}.${
    Math.floor(Math.random() * 250)
  }`; while (used.has(subnet));
  await incus.createNetwork({
    name,
    config: { "ipv4.address": `${subnet}.1/24`, "ipv4.nat": "false", "ipv6.address": "none" },
  }, { step: `create ${name}` });
  return { name, gateway: `${subnet}.1` };
}

Deno.test({
  name:
    "a coordinator in an instance drives isx mcp over HTTP through the proxy; everyone else is refused",
  ignore: NO_INCUS,
  async fn(t) {
    const incus = liveIncus();
    const made: string[] = [];
    const { name: bridge, gateway } = await makeBridge(incus);
    const home = makeHome({ mcp: `templates: [${TEMPLATE}, tpl-agents]\nmax-instances: 3\n` });
    const healthPort = 20000 + Math.floor(Math.random() * 20000);
    Deno.writeTextFileSync(
      `${home.configDir}/config.yaml`,
      `proxy:\n  bridge: ${bridge}\n  ports: { health: ${healthPort} }\n`,
    );
    const ca = await loadCa(`${home.stateDir}/ca`);
    const registry = new ClientRegistry(incusSource(incus), { now: Date.now, minRefreshMs: 200 });
    await registry.start();
    const env = (k: string) => home.env[k] ?? (k === "DENO_DIR" ? home.env.DENO_DIR : undefined);
    const perm = contextFrom(env, {
      cwd: home.dir,
      uid: Deno.uid() ?? 0,
      programDir: ROOT,
      execPath: Deno.execPath(),
      socket: LIVE_SOCKET,
    });
    const ctx = {
      prog: "isx",
      global: { socket: LIVE_SOCKET },
      perm,
      env: { DENO_DIR: home.env.DENO_DIR! },
    } as unknown as CliContext;
    const spec = mcpChildSpec(ctx);
    const policy = new Policy(emptyCredentials(), { domains: [MCP_HOST] });
    const start = () =>
      startProxy({
        listen: {
          tls: { hostname: gateway, port: 443 },
          forward: { hostname: gateway, port: 0 },
          health: [{ hostname: "127.0.0.1", port: healthPort }],
        },
        policy,
        ca,
        clients: registry,
        mcp: { spec, stopGraceMs: 10_000 },
      });
    let proxy = await start();
    const secrets: Record<string, string> = {};
    const launch = async (name: string, stamps: Record<string, string>) => {
      made.push(name);
      const secret = crypto.randomUUID();
      secrets[name] = secret;
      await launchPinned(incus, name, {
        bridge,
        image: IMAGE,
        stamps: {
          ...TRUSTED_STAMPS,
          "user.incus-spawn.instance-secret-sha256": sha256Hex(secret),
          ...stamps,
        },
      });
      await setUp(name, secret);
    };
    const setUp = async (name: string, secret: string) => {
      await incus.pushFile(name, CA, ca.certPem, { step: "push CA", mode: 0o644 });
      await incus.pushFile(name, "/run/isx/instance-secret", secret, {
        step: "push secret",
        mode: 0o400,
      }).catch(async () => {
        await execRecorded(incus, name, ["mkdir", "-p", "/run/isx"], { step: "mkdir" });
        await incus.pushFile(name, "/run/isx/instance-secret", secret, {
          step: "push secret",
          mode: 0o400,
        });
      });
      const r = await execRecorded(incus, name, [
        "bash",
        "-c",
        `update-ca-certificates >/dev/null 2>&1; for i in $(seq 120); do getent hosts ${MCP_HOST} | grep -q ${gateway} && exit 0; sleep 0.5; done; exit 1`,
      ], { step: "trust the CA, resolve the endpoint" });
      assert.equal(r.exitCode, 0, `${name}: ${r.stdout}${r.stderr}`);
    };
    try {
      await applyDns(incus, bridge, { names: [MCP_HOST], gateway });
      const grant = newGrant();
      const coord = testName("coord");
      const plain = testName("coord");
      await Promise.all([
        launch(coord, { "user.incus-spawn.mcp-caller": grant }),
        launch(plain, {}),
      ]);
      await registry.refresh();
      let session = "";
      let worker = "";
      let cut = "";

      await t.step(
        "the coordinator initializes, lists 17 tools, and its session is the instance",
        async () => {
          const r = await curl(incus, coord, { body: INIT(), accept: "application/json" });
          assert.equal(r.status, 200, r.body);
          session = r.headers["mcp-session-id"]!;
          assert.match(session, /^[0-9a-f-]{36}$/);
          assert.equal(((r.json!.result as Json).serverInfo as Json).name, "isx");
          const tools = await curl(incus, coord, {
            body: rpc("tools/list"),
            session,
            accept: "application/json",
          });
          assert.equal(((tools.json!.result as Json).tools as unknown[]).length, 17);
          // which agents of a template can coordinate (Pi has no MCP client; Codex no file header)
          const lt = await curl(incus, coord, {
            body: callTool("list_templates"),
            session,
            accept: "application/json",
          });
          const by = Object.fromEntries(
            (sc(lt).templates as Json[]).map((x) => [x.template, x.coordinate_agents]),
          );
          assert.deepEqual(by, { [TEMPLATE]: [], "tpl-agents": ["claude", "opencode"] });
          const pid = proxy.mcp!.childPid(`${LIVE_PROJECT}/${coord}`);
          assert.ok(pid, "one isx mcp child runs for the coordinator");
        },
      );

      await t.step(
        "create_instance makes a worker held by instance:<coordinator>:<grant>; exec runs in it",
        async () => {
          const r = await curl(incus, coord, {
            body: callTool("create_instance", {
              template: TEMPLATE,
              name_hint: "coord",
              purpose: "issue 20",
            }),
            session,
            accept: "application/json",
          });
          assert.equal(refusalCode(r), undefined, r.body);
          worker = String(sc(r).instance);
          made.push(worker);
          const st = readStamps((await incus.getInstance(worker)).value.config);
          assert.equal(st["mcp-session"], `instance:${coord}:${grant}`);
          assert.equal(st["mcp-client"], "coord-curl");
          assert.equal(st["mcp-caller"] ?? "", "", "a worker is never a coordinator");
          // an event-stream answer this time
          const e = await curl(incus, coord, {
            body: callTool("exec", { instance: worker, command: "echo from-worker" }),
            session,
            accept: "application/json, text/event-stream",
          });
          assert.equal(e.headers["content-type"], "text/event-stream", e.body);
          assert.equal(sc(e).stdout, "from-worker\n");
        },
      );

      await t.step(
        "a coordinator asking create_instance for a coordinator is refused and nothing is made",
        async () => {
          const before = (await incus.listInstances()).length;
          const r = await curl(incus, coord, {
            body: callTool("create_instance", { template: TEMPLATE, mcp_client: true }),
            session,
            accept: "application/json",
          });
          assert.equal(refusalCode(r), "invalid_argument", r.body);
          assert.equal((await incus.listInstances()).length, before);
        },
      );

      await t.step(
        "refused with 403 and no session: a plain instance, another presenting the coordinator's secret, the host",
        async () => {
          const own = await curl(incus, plain, { body: INIT() });
          assert.equal(own.status, 403, own.body);
          assert.match(own.body, /is not a coordinator/);
          const stolen = await curl(incus, plain, { body: INIT(), secret: secrets[coord]! });
          assert.equal(stolen.status, 403, stolen.body);
          assert.match(stolen.body, /does not belong to the calling instance/);
          const none = await curl(incus, coord, { body: INIT(), secret: "" });
          assert.equal(none.status, 403, none.body);
          // the coordinator's secret from the host's own address
          const host = await new Deno.Command("curl", {
            args: [
              "-sS",
              "--cacert",
              `${home.stateDir}/ca/ca.crt`,
              "--resolve",
              `${MCP_HOST}:443:${gateway}`,
              "-H",
              `X-Isx-Instance-Secret: ${secrets[coord]}`,
              "-d",
              JSON.stringify(INIT()),
              "-w",
              "\n%{http_code}",
              `https://${MCP_HOST}/mcp`,
            ],
          }).output();
          const out = new TextDecoder().decode(host.stdout);
          assert.match(out, /\n403$/, out);
          assert.match(out, /belongs to no instance/);
          assert.equal(
            proxy.mcp!.childPid(`${LIVE_PROJECT}/${plain}`),
            undefined,
            "no isx mcp for a refused caller",
          );
          // the coordinator's session is untouched by all of that
          const ok = await curl(incus, coord, {
            body: rpc("ping"),
            session,
            accept: "application/json",
          });
          assert.equal(ok.status, 200, ok.body);
        },
      );

      await t.step(
        "a copy of the coordinator is no coordinator, whatever secret it presents",
        async () => {
          const copy = testName("coord");
          made.push(copy);
          const src = (await incus.getInstance(coord)).value;
          const cidr = (await incus.getNetwork(bridge)).value.config["ipv4.address"]!;
          const address = pickAddress(cidr, await takenAddresses(incus, bridge));
          await incus.stopInstance(coord, { step: "stop coord", force: true });
          const copySecret = crypto.randomUUID();
          try {
            await incus.createInstance({
              name: copy,
              source: { type: "copy", source: coord, instance_only: true },
              // as every isx copy: the source's stamps unset unless stamped again
              config: copyConfig(src.config, {
                type: "instance",
                trusted: "true",
                "build-id": "live-test",
                "instance-secret-sha256": sha256Hex(copySecret),
                "static-ip": address,
              }),
              devices: { eth0: pinnedNic({ type: "nic", name: "eth0", network: bridge }, address) },
              start: true,
            }, { step: `copy ${coord}` });
          } finally {
            await incus.startInstance(coord, { step: "start coord" });
          }
          assert.equal(
            readStamps((await incus.getInstance(copy)).value.config)["mcp-caller"] ?? "",
            "",
          );
          secrets[copy] = copySecret;
          await setUp(copy, copySecret);
          await setUp(coord, secrets[coord]!);
          await registry.refresh();
          const own = await curl(incus, copy, { body: INIT() });
          assert.equal(own.status, 403, own.body);
          assert.match(own.body, /is not a coordinator/);
          const theirs = await curl(incus, copy, { body: INIT(), secret: secrets[coord]! });
          assert.equal(theirs.status, 403, theirs.body);
        },
      );

      await t.step(
        "the connection killed mid-call, then a new initialize: nothing half-made, the worker held again",
        async () => {
          const r = await curl(incus, coord, { body: INIT(), accept: "application/json" });
          session = r.headers["mcp-session-id"]!;
          const killed = await curl(incus, coord, {
            body: callTool("exec", { instance: worker, command: "sleep 4; touch /tmp/finished" }),
            session,
            accept: "application/json",
            maxTime: 1,
          });
          assert.equal(killed.rc, 28, `curl gave up mid-call: ${killed.body}`);
          // and a create_instance whose connection dies while it is under way: curl is killed
          // once Incus shows the copy (its answer waits for the start, the address and the
          // secret, ~1 s more); a fixed --max-time raced a create that ended sooner on a fast host
          const cuttingCall = curl(incus, coord, {
            body: callTool("create_instance", {
              template: TEMPLATE,
              name_hint: "coord",
              purpose: "cut",
            }),
            session,
            accept: "application/json, text/event-stream",
            pidFile: "/tmp/cut.pid",
          });
          await until(
            "the cut create under way",
            async () => {
              for (const i of await incus.listInstances()) {
                const st = readStamps(i.config);
                if (st["mcp-purpose"] === "cut") return true;
              }
              return undefined;
            },
            60_000,
            20,
          );
          await execRecorded(incus, coord, ["bash", "-c", "kill $(cat /tmp/cut.pid)"], {
            step: "cut the create's connection",
          });
          const cutting = await cuttingCall;
          assert.equal(cutting.rc, 143, `curl was killed mid-create: ${cutting.body}`);
          // the call went on in the child: the connection is not the session
          await until("the abandoned call to finish", async () => {
            const x = await execRecorded(incus, worker, ["test", "-e", "/tmp/finished"], {
              step: "probe",
            });
            return x.exitCode === 0 ? true : undefined;
          }, 60_000);
          // the cut create goes on in the child: its instance is made and held
          const cutName = await until("the cut create's instance, made", async () => {
            for (const i of await incus.listInstances()) {
              const st = readStamps(i.config);
              if (st["mcp-purpose"] === "cut" && !st["mcp-creating"] && i.status === "Running") {
                return i.name;
              }
            }
            return undefined;
          }, 180_000);
          made.push(cutName);
          cut = cutName;
          await until("the cut create to be logged as done", () => {
            const log = Deno.readTextFileSync(`${home.stateDir}/mcp/mcp.log`);
            // the first worker's line and the cut one's
            return (log.match(/tool=create_instance .*outcome=created/g) ?? []).length >= 2
              ? true
              : undefined;
          }, 120_000);
          const firstPid = proxy.mcp!.childPid(`${LIVE_PROJECT}/${coord}`);
          const again = await curl(incus, coord, { body: INIT(), accept: "application/json" });
          const old = session;
          session = again.headers["mcp-session-id"]!;
          assert.notEqual(session, old);
          assert.notEqual(
            proxy.mcp!.childPid(`${LIVE_PROJECT}/${coord}`),
            firstPid,
            "a new initialize ended the old child",
          );
          const stale = await curl(incus, coord, {
            body: rpc("ping"),
            session: old,
            accept: "application/json",
          });
          assert.equal(stale.status, 404);
          const list = await curl(incus, coord, {
            body: callTool("list_instances"),
            session,
            accept: "application/json",
          });
          const all = sc(list).instances as Json[];
          assert.equal(all.find((i) => i.instance === worker)?.state, "ready", list.body);
          // the cut create finished in the child and is held; nothing is left half-made
          const second = await until("the cut create's instance, held and ready", async () => {
            const l = await curl(incus, coord, {
              body: callTool("list_instances"),
              session,
              accept: "application/json",
            });
            return (sc(l).instances as Json[]).find((i) =>
              i.purpose === "cut" && i.state === "ready"
            );
          }, 120_000);
          made.push(String(second.instance));
          for (const i of await incus.listInstances()) {
            const st = readStamps(i.config);
            if (!st["mcp-owner"]?.endsWith(`:${home.stateDir}`)) continue;
            assert.equal(st["mcp-session"], `instance:${coord}:${grant}`, i.name);
            assert.equal(st["mcp-creating"] ?? "", "", `${i.name} half-made`);
            assert.equal(st["pending-op"] ?? "", "", `${i.name} half-made`);
            assert.equal(i.status, "Running", i.name);
          }
        },
      );

      await t.step(
        "the proxy restarted: the coordinator reconnects and holds what it held",
        async () => {
          await proxy.close();
          const st = readStamps((await incus.getInstance(worker)).value.config);
          assert.equal(
            st["mcp-orphaned"] ?? "",
            "",
            "the end of a coordinator's child releases nothing",
          );
          proxy = await start();
          const r = await curl(incus, coord, { body: INIT(), accept: "application/json" });
          assert.equal(r.status, 200, r.body);
          session = r.headers["mcp-session-id"]!;
          const e = await curl(incus, coord, {
            body: callTool("exec", { instance: worker, command: "true" }),
            session,
            accept: "application/json",
          });
          assert.equal(sc(e).exit_code, 0, e.body);
        },
      );

      await t.step(
        "destroy_instance; the audit log names the session and never the secret",
        async () => {
          const d = await curl(incus, coord, {
            body: callTool("destroy_instance", { instance: worker }),
            session,
            accept: "application/json",
          });
          assert.equal(refusalCode(d), undefined, d.body);
          const log = Deno.readTextFileSync(`${home.stateDir}/mcp/mcp.log`);
          assert.match(log, new RegExp(`session=instance:${coord}:${grant} tool=create_instance`));
          assert.match(log, /tool=destroy_instance/);
          for (const s of Object.values(secrets)) {
            assert.ok(!log.includes(s), "a secret in the audit log");
          }
          const del = await curl(incus, coord, { method: "DELETE", session });
          assert.equal(del.status, 204, del.body);
        },
      );

      await t.step(
        "approval withdrawn: the next session releases what it held of that template",
        async () => {
          Deno.writeTextFileSync(`${home.configDir}/mcp.yaml`, "templates: [tpl-agents]\n");
          const r = await curl(incus, coord, { body: INIT(), accept: "application/json" });
          session = r.headers["mcp-session-id"]!;
          const list = await curl(incus, coord, {
            body: callTool("list_instances"),
            session,
            accept: "application/json",
          });
          const entry = (sc(list).instances as Json[]).find((i) => i.instance === cut);
          assert.equal(entry?.state, "orphaned", list.body);
          const st = readStamps((await incus.getInstance(cut)).value.config);
          assert.match(st["mcp-orphaned"] ?? "", new RegExp(` instance:${coord}:${grant}$`));
          const log = Deno.readTextFileSync(`${home.stateDir}/mcp/mcp.log`);
          assert.match(log, new RegExp(`tool=rehold instance=${cut} outcome=released`));
        },
      );
    } finally {
      await proxy.close().catch(() => {});
      await registry.close();
      for (const i of await incus.listInstances()) {
        const s = readStamps(i.config);
        if (s["mcp-owner"]?.endsWith(`:${home.stateDir}`) && !made.includes(i.name)) {
          made.push(i.name);
        }
      }
      for (const n of made) await removeInstance(incus, n).catch(() => {});
      // a just-deleted instance may hold the bridge a moment longer
      for (let i = 0; i < 30; i++) {
        const gone = await incus.deleteNetwork(bridge, { step: `delete ${bridge}` }).then(
          () => true,
          (e) => hasCode(e, "not_found"),
        );
        if (gone) break;
        await new Promise((r) => setTimeout(r, 1000));
      }
      incus.close();
    }
  },
});
