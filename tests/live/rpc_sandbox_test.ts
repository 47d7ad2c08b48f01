/**
 * Conformance of the sandbox methods (isb-rpc.md §5.2, §5.3, §6) against the real daemon,
 * through the method handlers in-process: one sandbox carries most steps, so the file
 * creates two instances in all.
 */

import assert from "node:assert/strict";
import { LIVE_IMAGE, LIVE_PROJECT, NO_INCUS, testName } from "../helpers/live.ts";
import { cleanup, liveRig, progressOf } from "./_rpc.ts";

const INFO_KEYS = [
  "config",
  "created_at",
  "description",
  "devices",
  "labels",
  "name",
  "profiles",
  "status",
  "type",
];

Deno.test({
  name: "sandbox.* methods answer with the protocol's shapes, codes and texts on a real sandbox",
  ignore: NO_INCUS,
  async fn(t) {
    await using rig = await liveRig();
    const name = testName("rpcsb");
    const tag = crypto.randomUUID().slice(0, 8);
    const pruneKey = `isbprune${tag}`;
    const gone = `/nonexistent/isb-${tag}`;
    const labels = { app: tag, [pruneKey]: gone };
    const spec = { container_name: name, image: LIVE_IMAGE, labels };
    try {
      await t.step(
        "sandbox.create answers the new sandbox's info with exactly the spec's labels",
        async () => {
          const r = await rig.call("sandbox.create", { spec });
          assert.equal(r.error, undefined, JSON.stringify(r.error));
          const info = r.result as Record<string, unknown>;
          assert.deepEqual(Object.keys(info).sort(), INFO_KEYS);
          assert.equal(info.name, name);
          assert.equal(info.status, "Running");
          assert.equal(info.type, "container");
          assert.deepEqual(info.labels, labels);
          assert.deepEqual(info.profiles, ["default"]);
          assert.equal(typeof info.created_at, "string");
          assert.ok(!("user.isb.create-token" in (info.labels as object)));
          assert.ok("user.isb.create-token" in (info.config as object));
          assert.deepEqual(progressOf(r), [
            `${name}: creating from ${LIVE_IMAGE}`,
            `${name}: starting`,
          ]);
        },
      );

      await t.step(
        "sandbox.create on a taken name answers already_exists without data",
        async () => {
          const r = await rig.call("sandbox.create", { spec });
          assert.deepEqual(r.error, {
            code: "already_exists",
            message: `sandbox ${name} already exists`,
          });
        },
      );

      await t.step(
        "sandbox.ensure applies a change, then a second ensure reports no actions",
        async () => {
          const changed = { ...spec, raw_config: { "security.nesting": "true" } };
          const first = await rig.call("sandbox.ensure", { spec: changed });
          assert.equal(first.error, undefined, JSON.stringify(first.error));
          const { info, report } = first.result as {
            info: Record<string, unknown>;
            report: Record<string, unknown>;
          };
          assert.deepEqual(Object.keys(info).sort(), INFO_KEYS);
          assert.deepEqual(report, {
            name,
            created: false,
            applied: [{ action: "set_config", key: "security.nesting", to: "true", restart: true }],
            ports: {},
            restart_needed: ["security.nesting"],
          });
          assert.deepEqual(progressOf(first), [
            `${name}: ~ config security.nesting: (unset) -> true (takes effect on restart)`,
            `${name}: security.nesting changed; takes effect after \`isb restart ${name}\``,
          ]);
          const second = await rig.ok("sandbox.ensure", { spec: changed }) as {
            report: Record<string, unknown>;
          };
          assert.deepEqual(second.report, {
            name,
            created: false,
            applied: [],
            ports: {},
            restart_needed: [],
          });
        },
      );

      await t.step(
        "sandbox.plan on a present sandbox answers its status and no actions",
        async () => {
          const r = await rig.call("sandbox.plan", {
            spec: { ...spec, raw_config: { "security.nesting": "true" } },
          });
          assert.deepEqual(r, { result: { name, status: "Running", actions: [] }, events: [] });
        },
      );

      await t.step(
        "sandbox.plan on an absent sandbox answers status null and the create actions",
        async () => {
          const absent = testName("rpcabs");
          const r = await rig.ok("sandbox.plan", {
            spec: { container_name: absent, image: LIVE_IMAGE, cpus: 1 },
          });
          assert.deepEqual(r, {
            name: absent,
            status: null,
            actions: [
              {
                action: "create_instance",
                image: LIVE_IMAGE,
                pool: "default",
                config: { "limits.cpu": "1" },
                devices: { root: { type: "disk", path: "/", pool: "default" } },
                profiles: ["default"],
              },
              { action: "start_instance" },
            ],
          });
        },
      );

      await t.step("sandbox.resolve answers the desired state", async () => {
        const r = await rig.ok("sandbox.resolve", {
          spec: { ...spec, ports: ["8080:80"] },
        }) as Record<string, unknown>;
        assert.deepEqual(Object.keys(r).sort(), [
          "config",
          "devices",
          "exec",
          "image",
          "instance_type",
          "name",
          "owners",
          "pool",
          "profiles",
          "ready",
          "volumes",
        ]);
        assert.equal(r.instance_type, "container");
        assert.deepEqual(r.image, {
          spec: LIVE_IMAGE,
          server: null,
          protocol: null,
          alias: LIVE_IMAGE,
        });
        assert.deepEqual((r.devices as Record<string, unknown>)["port-host-8080"], {
          props: {
            type: "proxy",
            bind: "host",
            listen: "tcp:127.0.0.1:8080",
            connect: "tcp:127.0.0.1:80",
          },
        });
        assert.deepEqual(r.ready, ["running"]);
      });

      await t.step("sandbox.get answers info, and not_found naming a missing sandbox", async () => {
        const info = await rig.ok("sandbox.get", { name }) as Record<string, unknown>;
        assert.equal(info.name, name);
        const missing = testName("rpcmiss");
        const r = await rig.call("sandbox.get", { name: missing });
        assert.equal(r.error?.code, "not_found");
        assert.equal(r.error?.message, `sandbox ${missing} not found`);
        const bad = await rig.call("sandbox.get", { name, nmae: 1 });
        assert.equal(bad.error?.code, "invalid");
        assert.match(bad.error!.message, /nmae/);
      });

      await t.step("sandbox.list filters by label presence and value", async () => {
        const names = async (labels: string[]) =>
          (await rig.ok("sandbox.list", { labels }) as { name: string }[]).map((i) => i.name);
        assert.deepEqual(await names([`app=${tag}`]), [name]);
        assert.deepEqual(await names([pruneKey, `app=${tag}`]), [name]);
        assert.deepEqual(await names([`app=${tag}x`]), []);
        assert.deepEqual(await names([`isb.create-token`]), []);
      });

      await t.step("sandbox.remove of a running sandbox without force is refused", async () => {
        const r = await rig.call("sandbox.remove", { name });
        assert.deepEqual(r.error, {
          code: "invalid",
          message: `${name} is running; stop it first or force removal`,
        });
      });

      await t.step(
        "sandbox.wait_ready passes running, default_route, user_exists, path_writable, command",
        async () => {
          const r = await rig.call("sandbox.wait_ready", {
            name,
            ready: [
              "running",
              "default_route",
              { user_exists: "root" },
              { path_writable: "/tmp" },
              { command: ["true"] },
            ],
            ready_timeout: "60s",
            exec: { user: "nobody" },
          });
          assert.deepEqual(r, { result: null, events: [] });
          const fail = await rig.call("sandbox.wait_ready", {
            name,
            ready: [{ command: ["false"] }],
            ready_timeout: "1s",
          });
          assert.equal(fail.error?.code, "not_ready");
          const data = fail.error!.data as Record<string, unknown>;
          assert.deepEqual({ ...data, waited_secs: 0 }, {
            sandbox: name,
            check: "command(false)",
            detail: "not yet",
            waited_secs: 0,
          });
          assert.match(
            fail.error!.message,
            new RegExp(`^sandbox ${name} not ready after .+: command\\(false\\) \\(not yet\\)$`),
          );
          const nouser = await rig.call("sandbox.wait_ready", {
            name,
            ready: [{ path_writable: "/tmp" }],
            ready_timeout: "1s",
            exec: { user: "nosuchuser" },
          });
          assert.equal(nouser.error?.code, "not_ready");
          assert.match(
            (nouser.error!.data as { detail: string }).detail,
            /no such user nosuchuser/,
          );
        },
      );

      await t.step(
        "sandbox.add_port searches past a taken port and leaves a settled one alone",
        async () => {
          const blocker = Deno.listen({ hostname: "127.0.0.1", port: 0 });
          try {
            const base = (blocker.addr as Deno.NetAddr).port;
            const port = `127.0.0.1:${base}-${base + 5}:80`;
            const r = await rig.ok("sandbox.add_port", { name, port });
            assert.deepEqual(r, { listen: `tcp:127.0.0.1:${base + 1}` });
            assert.deepEqual(await rig.ok("sandbox.add_port", { name, port }), r);
            const devices =
              (await rig.ok("sandbox.get", { name }) as { devices: Record<string, unknown> })
                .devices;
            assert.deepEqual(devices[`port-host-${base}`], {
              type: "proxy",
              bind: "host",
              listen: `tcp:127.0.0.1:${base + 1}`,
              connect: "tcp:127.0.0.1:80",
            });
            const bad = await rig.call("sandbox.add_port", {
              name,
              port: { listen: "1", connect: "2", search: 3 },
            });
            assert.equal(bad.error?.code, "invalid");
            assert.match(bad.error!.message, /search/);
            assert.deepEqual(
              await rig.ok("sandbox.remove_device", { name, device: `port-host-${base}` }),
              { removed: true },
            );
            assert.deepEqual(
              await rig.ok("sandbox.remove_device", { name, device: `port-host-${base}` }),
              { removed: false },
            );
          } finally {
            blocker.close();
          }
          const root = await rig.call("sandbox.remove_device", { name, device: "root" });
          assert.deepEqual(root.error, {
            code: "invalid",
            message: "refusing to remove the root disk",
          });
        },
      );

      await t.step(
        "sandbox.stop, start and restart change the status and are no-ops when done",
        async () => {
          const status = async () =>
            (await rig.ok("sandbox.get", { name }) as { status: string }).status;
          assert.equal(await rig.ok("sandbox.stop", { name, force: true, timeout: "20s" }), null);
          assert.equal(await status(), "Stopped");
          assert.equal(await rig.ok("sandbox.stop", { name }), null);
          assert.equal(await rig.ok("sandbox.start", { name }), null);
          assert.equal(await status(), "Running");
          assert.equal(await rig.ok("sandbox.start", { name }), null);
          assert.equal(await rig.ok("sandbox.restart", { name }), null);
          assert.equal(await status(), "Running");
          const missing = await rig.call("sandbox.start", { name: testName("rpcmiss") });
          assert.equal(missing.error?.code, "not_found");
        },
      );

      await t.step(
        "sandbox.create with a missing local image is invalid and creates nothing",
        async () => {
          const absent = testName("rpcimg");
          const r = await rig.call("sandbox.create", {
            spec: { container_name: absent, image: "no-such-image-" + tag },
          });
          assert.equal(r.error?.code, "invalid");
          assert.match(
            r.error!.message,
            new RegExp(
              `^image "no-such-image-${tag}" not found locally \\(local images: .*${LIVE_IMAGE}.*\\); name a remote image with its server instead, e\\.g\\. images:ubuntu/24\\.04$`,
            ),
          );
          assert.equal((await rig.call("sandbox.get", { name: absent })).error?.code, "not_found");
        },
      );

      await t.step("prune is a dry run by default and deletes only when told", async () => {
        const dry = await rig.call("prune", { label: pruneKey });
        assert.deepEqual(dry.result, [{ name, path: gone, deleted: false }]);
        assert.deepEqual(progressOf(dry), [`would delete ${name}  (${pruneKey}=${gone} is gone)`]);
        assert.equal((await rig.ok("sandbox.get", { name }) as { name: string }).name, name);
        const real = await rig.call("prune", { label: pruneKey, dry_run: false });
        assert.deepEqual(real.result, [{ name, path: gone, deleted: true }]);
        assert.deepEqual(progressOf(real), [`deleting ${name}  (${pruneKey}=${gone} is gone)`]);
        assert.equal((await rig.call("sandbox.get", { name })).error?.code, "not_found");
      });
    } finally {
      await cleanup(rig, name);
    }
  },
});

Deno.test({
  name: "volume.* methods create, list, refuse removing a volume in use, and remove",
  ignore: NO_INCUS,
  async fn() {
    await using rig = await liveRig();
    const vol = testName("rpcvol");
    const name = testName("rpcvsb");
    try {
      assert.deepEqual(await rig.ok("volume.create", { name: vol }), {
        created: true,
        pool: "default",
      });
      assert.deepEqual(await rig.ok("volume.create", { name: vol, pool: "auto" }), {
        created: false,
        pool: "default",
      });
      const v = await rig.ok("volume.get", { name: vol });
      assert.deepEqual(v, {
        name: vol,
        pool: "default",
        content_type: "filesystem",
        config: {},
        used_by: [],
      });
      const all = await rig.ok("volume.list", {}) as { name: string; pool: string }[];
      assert.ok(all.some((x) => x.name === vol && x.pool === "default"));
      const bad = await rig.call("volume.get", { name: vol, pool: "no-such-pool" });
      assert.equal(bad.error?.code, "invalid");
      assert.match(
        bad.error!.message,
        /^storage pool "no-such-pool" does not exist \(have: .*default.*\)$/,
      );
      const r = await rig.call("sandbox.ensure", {
        spec: { container_name: name, image: LIVE_IMAGE, volumes: [`${vol}:/data:owner=nobody`] },
        wait_ready: false,
      });
      assert.equal(r.error, undefined, JSON.stringify(r.error));
      assert.ok(progressOf(r).includes(`${name}: ~ chown nobody /data`), progressOf(r).join("\n"));
      assert.equal((await rig.incus.pullFile(name, "/data")).uid, 65534, "owner fixup applied");
      const inUse = await rig.call("volume.remove", { name: vol });
      assert.deepEqual(inUse.error, {
        code: "invalid",
        // Incus's own used_by path, which names a project other than default
        message: `volume ${vol} is in use by /1.0/instances/${name}?project=${LIVE_PROJECT}`,
      });
      await rig.ok("sandbox.remove", { name, force: true });
      assert.equal(await rig.ok("volume.remove", { name: vol }), null);
      const gone = await rig.call("volume.get", { name: vol });
      assert.deepEqual(gone.error, {
        code: "not_found",
        message: `volume ${vol} in pool default not found`,
      });
      assert.equal((await rig.call("volume.remove", { name: vol })).error?.code, "not_found");
    } finally {
      await cleanup(rig, name);
      await rig.incus.deleteVolume("default", vol, { step: "cleanup" }).catch(() => {});
    }
  },
});
