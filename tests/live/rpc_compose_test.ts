/**
 * Conformance of `compose.load|plan|up|down` (isb-rpc.md §5.8, §12) against the real daemon:
 * an isb.yaml + isb.override.yaml + .env in a temp dir (default discovery from the server's
 * cwd), two services with depends_on, a bind mount and a named volume.
 */

import assert from "node:assert/strict";
import { LIVE_ARGS, LIVE_IMAGE, NO_INCUS, testName } from "../helpers/live.ts";
import { cleanup, liveRig, progressOf } from "./_rpc.ts";
import { spawnProgram } from "../helpers/spawn.ts";

const ISB_YAML = `
name: \${PROJ}
x-common: &common
  image: \${IMAGE}
services:
  web:
    <<: *common
    depends_on: [db]
    volumes:
      - ./src:/srv/src:ro
    labels: {role: web}
  db:
    <<: *common
    volumes:
      - data:/var/lib/data
volumes:
  data: {}
`;

const OVERRIDE_YAML = `
services:
  web:
    environment:
      GREETING: \${GREETING}
`;

// deno-lint-ignore no-explicit-any
type LoadResult = { name: string; base_dir: string; files: string[]; file: any };

Deno.test({
  name:
    "compose.load, plan, up and down drive a two-service project with a bind mount and a volume",
  ignore: NO_INCUS,
  async fn(t) {
    const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "isb-compose-" }));
    const proj = testName("cmp");
    const [db, web, vol] = [`${proj}-db`, `${proj}-web`, `${proj}_data`];
    await Deno.chmod(dir, 0o755); // the unprivileged guest must traverse it for the bind mount
    await Deno.writeTextFile(`${dir}/isb.yaml`, ISB_YAML);
    await Deno.writeTextFile(`${dir}/isb.override.yaml`, OVERRIDE_YAML);
    await Deno.writeTextFile(`${dir}/.env`, `GREETING="hello from env"\nIMAGE=${LIVE_IMAGE}\n`);
    await Deno.mkdir(`${dir}/src`, { mode: 0o755 });
    await Deno.writeTextFile(`${dir}/src/hello.txt`, "bind works\n", { mode: 0o644 });
    await using rig = await liveRig({ cwd: dir });
    const params = { vars: { PROJ: proj } };
    try {
      await t.step("compose.load finds isb.yaml + override + .env and fills names", async () => {
        const r = await rig.ok("compose.load", params) as LoadResult;
        assert.equal(r.name, proj);
        assert.equal(r.base_dir, dir);
        assert.equal(r.files.length, 2);
        assert.match(r.files[0]!, /isb\.yaml$/);
        assert.match(r.files[1]!, /isb\.override\.yaml$/);
        assert.deepEqual(r.file.services.web, {
          container_name: web,
          image: LIVE_IMAGE,
          depends_on: { db: { condition: "service_started" } },
          volumes: [{ type: "bind", source: "./src", target: "/srv/src", read_only: true }],
          labels: { role: "web" },
          environment: { GREETING: "hello from env" },
        });
        assert.deepEqual(r.file.services.db.volumes, [{
          type: "volume",
          source: "data",
          target: "/var/lib/data",
        }]);
        assert.equal(r.file.volumes.data.name, vol);
      });

      await t.step("compose.plan lists create actions in dependency order", async () => {
        const plans = await rig.ok("compose.plan", params) as {
          name: string;
          status: null;
          actions: { action: string }[];
        }[];
        assert.deepEqual(plans.map((p) => [p.name, p.status]), [[db, null], [web, null]]);
        assert.deepEqual(plans[0]!.actions.map((a) => a.action), [
          "create_volume",
          "create_instance",
          "start_instance",
        ]);
        assert.deepEqual(plans[1]!.actions.map((a) => a.action), [
          "create_instance",
          "start_instance",
        ]);
      });

      await t.step(
        "compose.up creates both services in order, then reports them up to date",
        async () => {
          const up = await rig.call("compose.up", params);
          assert.equal(up.error, undefined, JSON.stringify(up.error));
          const out = up.result as {
            service: string;
            report: { name: string; created: boolean };
          }[];
          assert.deepEqual(out.map((o) => [o.service, o.report.name, o.report.created]), [[
            "db",
            db,
            true,
          ], ["web", web, true]]);
          const lines = progressOf(up);
          assert.deepEqual(lines.slice(0, 3), [
            `${db}: creating volume ${vol} on default`,
            `${db}: creating from ${LIVE_IMAGE}`,
            `${db}: starting`,
          ]);
          const cat = await rig.incus.execCapture(web, ["cat", "/srv/src/hello.txt"]);
          assert.equal(new TextDecoder().decode(cat.stdout), "bind works\n");
          const info = await rig.ok("sandbox.get", { name: web }) as {
            config: Record<string, string>;
            labels: object;
          };
          assert.equal(info.config["environment.GREETING"], "hello from env");
          assert.deepEqual(info.labels, { role: "web" });
          const again = await rig.call("compose.up", params);
          assert.deepEqual(
            (again.result as { report: { applied: unknown[]; restart_needed: unknown[] } }[])
              .map((o) => [o.report.applied, o.report.restart_needed]),
            [[[], []], [[], []]],
          );
          assert.deepEqual(progressOf(again), [`${db}: up to date`, `${web}: up to date`]);
        },
      );

      await t.step(
        "compose.up with an unknown service names the files and the services",
        async () => {
          const r = await rig.call("compose.up", { ...params, services: ["nope"] });
          assert.equal(r.error?.code, "invalid");
          assert.match(
            r.error!.message,
            /^no service "nope" in .*isb\.yaml, .*isb\.override\.yaml \(have: db, web\)$/,
          );
        },
      );

      await t.step(
        "compose.down removes dependents first and, with volumes, the file's volumes",
        async () => {
          const down = await rig.call("compose.down", { ...params, volumes: true });
          assert.equal(down.error, undefined, JSON.stringify(down.error));
          assert.deepEqual(down.result, null);
          assert.deepEqual(progressOf(down), [
            `${web}: deleted`,
            `${db}: deleted`,
            `volume ${vol}: deleted`,
          ]);
          const again = await rig.call("compose.down", params);
          assert.deepEqual(progressOf(again), [`${web}: not present`, `${db}: not present`]);
        },
      );
    } finally {
      await cleanup(rig, web, db);
      await rig.incus.deleteVolume("default", vol, { step: "cleanup" }).catch(() => {});
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "isb rpc answers compose.load, sandbox.get, volume.list and prune through the real process",
  ignore: NO_INCUS,
  async fn() {
    const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "isb-rpcproc-" }));
    try {
      await Deno.writeTextFile(
        `${dir}/isb.yaml`,
        `services:\n  web: {image: "\${IMG:-${LIVE_IMAGE}}", cpus: 2}\n`,
      );
      await using p = spawnProgram([...LIVE_ARGS, "rpc"], { cwd: dir });
      const hello = await p.readJson();
      assert.equal(hello.protocol, 1);
      const missing = testName("rpcproc");
      await p.send({ id: 1, method: "compose.load", params: { project_name: "Demo App" } });
      await p.send({ id: 2, method: "sandbox.get", params: { name: missing } });
      await p.send({ id: 3, method: "sandbox.get", params: { name: missing, bogus: true } });
      await p.send({ id: 4, method: "volume.list", params: { pool: "default" } });
      await p.send({
        id: 5,
        method: "prune",
        params: { label: `isbnolabel${crypto.randomUUID().slice(0, 8)}` },
      });
      const replies = new Map<unknown, Record<string, unknown>>();
      while (replies.size < 5) {
        const line = await p.readJson(60_000);
        if ("result" in line || "error" in line) replies.set(line.id, line);
      }
      const load = replies.get(1)!.result as LoadResult;
      assert.equal(load.name, "demo-app");
      assert.equal(load.base_dir, dir);
      assert.deepEqual(load.file.services.web, {
        container_name: "demo-app-web",
        image: LIVE_IMAGE,
        cpus: "2",
      });
      assert.deepEqual(replies.get(2)!.error, {
        code: "not_found",
        message: `sandbox ${missing} not found`,
      });
      const bad = replies.get(3)!.error as { code: string; message: string };
      assert.equal(bad.code, "invalid");
      assert.match(bad.message, /bogus/);
      assert.ok(Array.isArray(replies.get(4)!.result));
      assert.deepEqual(replies.get(5)!.result, []);
      await p.closeStdin();
      assert.equal((await p.wait()).code, 0);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "compose.up writes secret files, supervises a restart command and waits for healthy dependencies",
  ignore: NO_INCUS,
  async fn() {
    const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "isb-compose2-" }));
    const proj = testName("cmx");
    const [api, app] = [`${proj}-api`, `${proj}-app`];
    await Deno.writeTextFile(`${dir}/token.txt`, "file-secret\n");
    await Deno.writeTextFile(
      `${dir}/isb.yaml`,
      `name: ${proj}
services:
  api:
    image: ${LIVE_IMAGE}
    command: ["sleep", "infinity"]
    restart: always
    healthcheck: {test: ["CMD", "systemctl", "is-active", "isb-api.service"], interval: 1s, retries: 30}
    secrets: [token]
  app:
    image: ${LIVE_IMAGE}
    depends_on: {api: {condition: service_healthy}}
secrets:
  token: {file: ./token.txt}
`,
    );
    await using rig = await liveRig({ cwd: dir });
    try {
      const up = await rig.call("compose.up", {});
      assert.equal(up.error, undefined, JSON.stringify(up.error));
      const lines = progressOf(up);
      for (
        const want of [
          `${api}: supervising command as isb-api.service`,
          `${api}: waiting for api to be healthy`,
          `${api}: healthy`,
        ]
      ) assert.ok(lines.includes(want), `missing ${JSON.stringify(want)} in ${lines.join("\n")}`);
      assert.ok(
        lines.indexOf(`${api}: healthy`) < lines.indexOf(`${app}: creating from ${LIVE_IMAGE}`),
      );
      const secret = await rig.incus.pullFile(api, "/run/secrets/token");
      assert.equal(new TextDecoder().decode(secret.data), "file-secret\n");
      assert.equal(secret.mode & 0o777, 0o400);
      assert.ok(
        !JSON.stringify(up).includes("file-secret"),
        "no reply or event carries the secret",
      );
      const again = await rig.call("compose.up", {});
      assert.ok(
        !progressOf(again).some((l) => l.includes("supervising")),
        "an unchanged unit is left alone",
      );
    } finally {
      await cleanup(rig, app, api);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
