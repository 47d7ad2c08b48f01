/**
 * `isb rpc` and `isx mcp` against this host's incusd as an Incus *remote*: over HTTPS on
 * loopback with a client certificate the real `incus remote add` made and incusd trusts
 * (tests/helpers/incus_remote.ts), with `--socket` pointing nowhere so nothing can fall back
 * to the unix socket. A sandbox is created, exec'd in and removed through `isb --remote`; an
 * agent's instance is created, exec'd in and destroyed through `isx mcp --remote`. Then the
 * failures a user meets, each with what to run: an unknown remote, a missing client key, a
 * server certificate that is not the pinned one, a client certificate incusd does not trust,
 * and `--target` on a server outside a cluster.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createIncusClient, isNotFound } from "../../rpc/mod.ts";
import { readStamps } from "../../mcp/mod.ts";
import {
  LIVE_IMAGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";
import { ensureBuilt } from "../helpers/built.ts";
import { liveRemote } from "../helpers/incus_remote.ts";
import { RpcClient } from "../helpers/rpc_client.ts";
import { call, connect, makeHome, refusal } from "../helpers/mcp.ts";
import { spawnProgram } from "../helpers/spawn.ts";

const NOWHERE = "/nonexistent/isx-remote/unix.socket";
const DENO_DIR = Deno.env.get("DENO_DIR") ||
  `${Deno.env.get("XDG_CACHE_HOME") || `${Deno.env.get("HOME")}/.cache`}/deno`;
const TEMPLATE = "tpl-minimal";
const unb64 = (s: unknown) =>
  new TextDecoder().decode(Uint8Array.from(atob(String(s)), (c) => c.charCodeAt(0)));
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;
const text = (r: Record<string, unknown>) => (r.content as { text: string }[])[0]!.text;

/** Runs `isx ARGS` (no stdin) and answers its exit code and stderr. */
async function isx(args: string[], env: Record<string, string>): Promise<[number, string]> {
  await using p = spawnProgram(args, { prog: "isx", env: { DENO_DIR, NO_COLOR: "1", ...env } });
  await p.closeStdin();
  const { code } = await p.wait(60_000);
  return [code, p.stderr()];
}

async function selfSigned(dir: string, cn: string): Promise<{ cert: string; key: string }> {
  const out = await new Deno.Command("openssl", {
    args: [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      `${dir}/${cn}.key`,
      "-out",
      `${dir}/${cn}.crt`,
      "-days",
      "1",
      "-subj",
      `/CN=${cn}`,
      "-addext",
      "subjectAltName=IP:127.0.0.1",
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return {
    cert: await Deno.readTextFile(`${dir}/${cn}.crt`),
    key: await Deno.readTextFile(`${dir}/${cn}.key`),
  };
}

/** A copy of the incus client config `conf` with `files` replaced (or removed when null). */
async function variant(conf: string, files: Record<string, string | null>): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "isx-incus-conf-" });
  await new Deno.Command("cp", { args: ["-a", `${conf}/.`, dir] }).output();
  for (const [f, v] of Object.entries(files)) {
    if (v === null) await Deno.remove(`${dir}/${f}`);
    else await Deno.writeTextFile(`${dir}/${f}`, v);
  }
  return dir;
}

Deno.test({
  name: "isb rpc and isx mcp drive real instances over an Incus remote (HTTPS, client certificate)",
  ignore: NO_INCUS,
  async fn(t) {
    const local = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const rname = `isxtest-rt-${crypto.randomUUID().slice(0, 8)}`;
    const scratch = await Deno.makeTempDir({ prefix: "isx-remote-" });
    const made: string[] = [];
    try {
      await using remote = await liveRemote(local, rname);
      const env = { INCUS_CONF: remote.conf };

      await t.step("isb --remote NAME rpc creates, execs in and removes a sandbox", async () => {
        const name = testName("remote");
        made.push(name);
        await using rpc = await RpcClient.start(["--socket", NOWHERE, "--remote", rname], {
          env: { ...env, DENO_DIR },
        });
        assert.equal(rpc.hello?.protocol, 1, rpc.program.stderr());
        const created = await rpc.call("sandbox.create", {
          spec: { container_name: name, image: LIVE_IMAGE },
        });
        assert.equal(created.error, undefined, JSON.stringify(created.error));
        assert.equal((created.result as { status: string }).status, "Running");
        const r = await rpc.call("sandbox.exec", {
          name,
          argv: ["sh", "-c", 'cat; echo "$0"', "over-https"],
          stdin: { data: btoa("from stdin\n") },
        });
        assert.equal(r.error, undefined, JSON.stringify(r.error));
        const res = r.result as { exit_code: number; stdout: string };
        assert.equal(res.exit_code, 0);
        assert.equal(unb64(res.stdout), "from stdin\nover-https\n");
        assert.equal((await local.getInstance(name)).value.name, name, "made on this incusd");
        const removed = await rpc.call("sandbox.remove", { name, force: true });
        assert.equal(removed.error, undefined, JSON.stringify(removed.error));
        await assert.rejects(local.getInstance(name), isNotFound);
      });

      await t.step("isx --remote NAME mcp creates, execs in and destroys an instance", async () => {
        const h = makeHome({ mcp: `templates: [${TEMPLATE}]\n` });
        Object.assign(h.env, env);
        try {
          await ensureBuilt(TEMPLATE); // in the lab, over the socket (tests/helpers/built.ts)
          const client = await connect(h, "legacy", {
            extra: ["--no-preflight", "--socket", NOWHERE, "--remote", rname],
          });
          try {
            const c = await call(client, "create_instance", {
              template: TEMPLATE,
              name_hint: "rmt",
            });
            assert.equal(refusal(c), undefined, text(c));
            const name = String(sc(c).instance);
            made.push(name);
            assert.equal(
              readStamps((await local.getInstance(name)).value.config)["mcp-cwd"],
              h.dir,
            );
            const e = sc(await call(client, "exec", { instance: name, command: "echo remote-ok" }));
            assert.deepEqual([e.exit_code, e.stdout], [0, "remote-ok\n"]);
            const gone = await call(client, "destroy_instance", { instance: name });
            assert.equal(sc(gone).already, false, text(gone));
            await assert.rejects(local.getInstance(name), isNotFound);
          } finally {
            await client.close();
          }
        } finally {
          await Deno.remove(h.dir, { recursive: true });
        }
      });

      await t.step(
        "an unknown remote and a missing client key fail before any work, saying what to run",
        async () => {
          const [code, err] = await isx(["--remote", "nope", "list"], env);
          assert.equal(code, 1, err);
          assert.match(
            err,
            /unknown Incus remote "nope": it is not in .*config\.yml \(known: [^)]*isxtest-rt-/,
          );
          assert.match(err, /`incus remote add nope https:\/\/HOST:8443`/);
          const nokey = await variant(remote.conf, { "client.key": null });
          const [c2, e2] = await isx(["--remote", rname, "list"], { INCUS_CONF: nokey });
          assert.equal(c2, 1, e2);
          assert.match(
            e2,
            /no client certificate: .*client\.key is missing; create one with `incus remote generate-certificate`/,
          );
          await Deno.remove(nokey, { recursive: true });
        },
      );

      await t.step(
        "a server certificate other than the pinned one is refused (connect), naming incus remote add",
        async () => {
          const other = await selfSigned(scratch, "other-server");
          const conf = await variant(remote.conf, { [`servercerts/${rname}.crt`]: other.cert });
          const [code, err] = await isx(["--remote", rname, "list"], { INCUS_CONF: conf });
          await Deno.remove(conf, { recursive: true });
          assert.equal(code, 6, err);
          assert.match(
            err,
            new RegExp(
              `cannot connect to incusd at ${remote.url}: .*certificate.*run \`incus remote add ${rname} ${remote.url}\``,
            ),
          );
        },
      );

      await t.step(
        "a client certificate incusd does not trust is refused, naming incus config trust add",
        async () => {
          const stranger = await selfSigned(scratch, "stranger");
          const conf = await variant(remote.conf, {
            "client.crt": stranger.cert,
            "client.key": stranger.key,
          });
          const [code, err] = await isx(["--remote", rname, "list"], { INCUS_CONF: conf });
          await Deno.remove(conf, { recursive: true });
          assert.equal(code, 1, err);
          assert.match(
            err,
            /does not trust this client's certificate: on the server run `incus config trust add-certificate <client\.crt>`/,
          );
        },
      );

      await t.step(
        "--target on an incusd outside a cluster is refused before any work",
        async () => {
          const [code, err] = await isx(["--remote", rname, "--target", "m9", "list"], env);
          assert.equal(code, 1, err);
          assert.match(
            err,
            /--target m9: incusd at https:\/\/127\.0\.0\.1:\d+ is not a cluster member/,
          );
        },
      );
    } finally {
      await Deno.remove(scratch, { recursive: true });
      for (const n of made) await removeInstance(local, n);
      local.close();
    }
  },
});
