/**
 * `isb rpc` started from `$HOME` (the real entry point under the launchers' flags, a temp
 * HOME of our own) cannot read the host user's keys: `~/.ssh`, the isx credentials file and
 * the proxy CA's key are denied to it although its working-directory grant covers them, and
 * a compose secret file under them (directly or through a symlink) is refused with
 * `invalid` naming the path and why, as is a compose or env file linking there (`parse`). No Incus is needed: both refusals come first.
 */

import assert from "node:assert/strict";
import { startFakeIncusd } from "./fakes/incusd.ts";
import { programArgs, type ProgramHandle, spawnProgram } from "./helpers/spawn.ts";

const KEYS = {
  ssh: ".ssh/id_ed25519",
  credentials: ".config/isx/credentials.yaml",
  caKey: ".local/state/isx/ca/ca.key",
};
const SECRET = "SECRET-MATERIAL-7f3a";
// The child's HOME is ours: keep Deno's module cache where the test's is.
const DENO_DIR = Deno.env.get("DENO_DIR") || `${Deno.env.get("HOME")}/.cache/deno`;

async function withRpcInHome(
  fn: (p: ProgramHandle, home: string) => Promise<void>,
  socket?: string,
) {
  const home = await Deno.makeTempDir({ prefix: "isb-home-" });
  for (const rel of Object.values(KEYS)) {
    await Deno.mkdir(`${home}/${rel.split("/").slice(0, -1).join("/")}`, { recursive: true });
    await Deno.writeTextFile(`${home}/${rel}`, `${SECRET}\n`);
  }
  await Deno.symlink(`${home}/${KEYS.ssh}`, `${home}/innocent.txt`);
  await Deno.symlink(`${home}/${KEYS.credentials}`, `${home}/innocent.yaml`);
  await Deno.symlink(`${home}/${KEYS.credentials}`, `${home}/innocent.env`);
  const env = {
    HOME: home,
    XDG_CONFIG_HOME: "",
    XDG_STATE_HOME: "",
    XDG_CACHE_HOME: "",
    INCUS_SOCKET: socket ?? `${home}/no-incus.socket`,
    DENO_DIR,
  };
  const p = spawnProgram(["rpc"], { env, cwd: home });
  try {
    await fn(p, home);
  } finally {
    await p[Symbol.asyncDispose]();
    await Deno.remove(home, { recursive: true });
  }
}

function errorOf(r: Record<string, unknown>): { code: string; message: string; data?: unknown } {
  assert.ok(r.error, `expected an error, got ${JSON.stringify(r).slice(0, 300)}`);
  return r.error as { code: string; message: string; data?: unknown };
}

Deno.test("isb rpc started from $HOME is launched with --deny-read of the user's keys", () => {
  const home = "/home/someone";
  const p = spawnArgs(home);
  const deny = p.find((a) => a.startsWith("--deny-read="))?.slice("--deny-read=".length);
  assert.ok(deny, p.join(" "));
  assert.deepEqual(deny.split(",").sort(), [
    `${home}/.config/isx`,
    `${home}/.local/state/isx`,
    `${home}/.ssh`,
  ]);
  assert.ok(p.some((a) => a.startsWith("--allow-read=") && a.split(/[=,]/).includes(home)));
});

/** The `deno run` arguments spawnProgram uses for `isb rpc` with this HOME as cwd. */
function spawnArgs(home: string): string[] {
  const env = { HOME: home, XDG_CONFIG_HOME: "", XDG_STATE_HOME: "", XDG_CACHE_HOME: "" };
  return programArgs(["rpc"], { env, cwd: home });
}

Deno.test("isb rpc started from $HOME cannot read ~/.ssh, the credentials or the CA key", async () => {
  await withRpcInHome(async (p) => {
    await p.readJson(); // hello
    let id = 0;
    for (const rel of Object.values(KEYS)) {
      await p.send({ id: ++id, method: "compose.load", params: { files: [`./${rel}`] } });
      const r = await p.readJson();
      const err = errorOf(r);
      assert.equal(err.code, "invalid", err.message);
      // the canonical check refuses it before Deno's --deny-read would (rpc/host_paths.ts)
      assert.match(err.message, /is under .*, which isb rpc never reads/);
      assert.ok(!JSON.stringify(r).includes(SECRET));
    }
  });
});

Deno.test("compose and env files that link into the isx config are refused unread", async () => {
  await withRpcInHome(async (p, home) => {
    await p.readJson();
    await Deno.writeTextFile(`${home}/isb.yaml`, "services:\n  web: {image: debian-base}\n");
    const cases = [
      { files: ["./innocent.yaml"] },
      { files: ["./isb.yaml"], env_files: ["./innocent.env"] },
    ];
    let id = 0;
    for (const params of cases) {
      await p.send({ id: ++id, method: "compose.load", params });
      const r = await p.readJson();
      const err = errorOf(r);
      // a compose or env file that cannot be read is `parse` naming it (isb-rpc.md §3)
      assert.equal(err.code, "parse", err.message);
      assert.ok(
        err.message.includes(`a link to ${home}/${KEYS.credentials} is under`),
        err.message,
      );
      assert.match(err.message, /which isb rpc never reads/);
      assert.ok(!JSON.stringify(r).includes(SECRET));
    }
  });
});

Deno.test("compose.up with a secret file under ~/.ssh or the isx config is invalid, naming it", async () => {
  await withRpcInHome(async (p, home) => {
    await p.readJson();
    const cases = [
      { file: `./${KEYS.ssh}`, path: `${home}/${KEYS.ssh}`, root: `${home}/.ssh` },
      {
        file: `./${KEYS.credentials}`,
        path: `${home}/${KEYS.credentials}`,
        root: `${home}/.config/isx`,
      },
      { file: `./${KEYS.caKey}`, path: `${home}/${KEYS.caKey}`, root: `${home}/.local/state/isx` },
      // a symlink in the working directory resolves past Deno's denial: refused by its target
      { file: "./innocent.txt", path: `${home}/${KEYS.ssh}`, root: `${home}/.ssh` },
    ];
    let id = 0;
    for (const c of cases) {
      const compose = `${home}/isb-${++id}.yaml`;
      await Deno.writeTextFile(
        compose,
        `secrets:\n  k: {file: ${JSON.stringify(c.file)}}\n` +
          "services:\n  web: {image: debian-base, command: [sleep, infinity], secrets: [k]}\n",
      );
      await p.send({ id, method: "compose.up", params: { files: [compose] } });
      let r = await p.readJson();
      while ("event" in r) r = await p.readJson();
      const err = errorOf(r);
      assert.equal(err.code, "invalid", err.message);
      assert.ok(err.message.includes(`${c.path} is under ${c.root}`), err.message);
      assert.match(err.message, /which isb rpc never reads/);
      assert.deepEqual(err.data, { key: 'secret "k": file', path: c.path });
      assert.ok(!JSON.stringify(r).includes(SECRET));
    }
  });
});

Deno.test("isx commands other than rpc start without rpc's read denials", () => {
  for (const opts of [{ prog: "isx" as const }, { env: { ISX_PROG: "isx" } }]) {
    for (const cmd of ["build", "init", "proxy", "branch"]) {
      const args = programArgs([cmd], opts);
      assert.ok(!args.some((a) => a.startsWith("--deny-read")), `${cmd}: ${args.join(" ")}`);
    }
    assert.ok(programArgs(["rpc"], opts).some((a) => a.startsWith("--deny-read=")));
  }
});

Deno.test("sandbox.resolve refuses bind sources in, linking to, or holding the user's keys", async () => {
  // host facts come from a fake incusd: the refusal is isb's, before anything is created
  await using fake = await startFakeIncusd([
    { route: "GET /1.0/storage-pools", metadata: [{ name: "default", driver: "dir" }] },
    {
      route: "GET /1.0",
      metadata: { api_extensions: [], environment: { driver: "lxc", server_version: "6.0.4" } },
    },
  ]);
  await withRpcInHome(async (p, home) => {
    await p.readJson();
    await Deno.symlink(`${home}/.ssh`, `${home}/keys`);
    await Deno.mkdir(`${home}/src`);
    let id = 0;
    for (const source of ["./.ssh", "./keys", "~", "~/.config", home]) {
      const spec = { name: "t-hard-bind", image: "debian-base", volumes: [`${source}:/mnt/x`] };
      await p.send({ id: ++id, method: "sandbox.resolve", params: { spec } });
      const err = errorOf(await p.readJson());
      assert.equal(err.code, "invalid", `${source}: ${err.message}`);
      assert.match(err.message, /isb rpc never (reads|exposes)/, `${source}: ${err.message}`);
    }
    const spec = { name: "t-hard-bind", image: "debian-base", volumes: ["./src:/mnt/src"] };
    await p.send({ id: ++id, method: "sandbox.resolve", params: { spec } });
    const ok = await p.readJson();
    assert.ok(!ok.error, JSON.stringify(ok));
  }, fake.socket);
});
