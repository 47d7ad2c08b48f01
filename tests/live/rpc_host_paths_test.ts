/**
 * Issue 18 part 3, as an attacker with the rpc protocol: `isb rpc` started in a `$HOME` of
 * our own (a fake `~/.ssh/id_test`, never a real key), in an Incus project the test makes,
 * asked for sandboxes whose `raw_devices` (disk sources, a block device), `raw_config`
 * `raw.lxc` mount entries and compose `devices` point into `~/.ssh`, at `~` and at `/`
 * (directly, through `~`, `${HOME}`, a symlink, a trailing slash). Each is refused with
 * `invalid` naming the key and the path, and after all of them the project holds no
 * instance. A benign sandbox with a bind of a project directory is created in the same
 * project, so the refusals are the check's, not a broken project.
 *
 * Before the check (`ab6a887`) the first attempt created the sandbox and `cat
 * /mnt/keys/id_test` printed the key.
 */

import assert from "node:assert/strict";
import {
  LIVE_ARGS,
  LIVE_IMAGE,
  liveIncus,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";

import { RpcClient, streamText } from "../helpers/rpc_client.ts";

const DENO_DIR = Deno.env.get("DENO_DIR") || `${Deno.env.get("HOME")}/.cache/deno`;
const KEY = "FAKE-KEY-i-paths-do-not-leak";

Deno.test({
  name:
    "isb rpc refuses raw_devices, devices and raw.lxc sources in ~/.ssh, ~ and /, creating nothing",
  ignore: NO_INCUS,
  async fn() {
    const base = liveIncus();
    const project = `i-paths-${crypto.randomUUID().slice(0, 8)}`;
    const incus = base.withProject(project);
    const home = await Deno.makeTempDir({ prefix: "i-paths-home-" });
    const name = testName("paths");
    const ok = testName("paths-ok");
    let made = false;
    try {
      await base.call("POST", "/1.0/projects", {
        body: {
          name: project,
          description: "i-paths live test (tests/live/rpc_host_paths_test.ts)",
          config: { "features.images": "false", "features.profiles": "false" },
        },
      });
      made = true;
      await Deno.mkdir(`${home}/.ssh`, { mode: 0o700 });
      await Deno.writeTextFile(`${home}/.ssh/id_test`, `${KEY}\n`);
      await Deno.mkdir(`${home}/work`);
      await Deno.writeTextFile(`${home}/work/hello.txt`, "hello\n");
      await Deno.symlink(`${home}/.ssh`, `${home}/keys`);
      await using rpc = await RpcClient.start([...LIVE_ARGS, "--project", project], {
        cwd: home,
        env: { HOME: home, XDG_CONFIG_HOME: "", XDG_STATE_HOME: "", DENO_DIR },
      });

      const disk = (source: string) => ({
        raw_devices: { keys: { type: "disk", source, path: "/mnt/keys", shift: "true" } },
      });
      const lxc = (source: string) => ({
        raw_config: { "raw.lxc": `lxc.mount.entry = ${source} mnt/keys none bind,create=dir 0 0` },
      });
      const attempts: [string, Record<string, unknown>, string, string][] = [
        ["raw_devices ~/.ssh", disk(`${home}/.ssh`), "raw_devices.keys.source", `${home}/.ssh`],
        ["raw_devices ~/.ssh/", disk("~/.ssh/"), "raw_devices.keys.source", `${home}/.ssh`],
        ["raw_devices a link", disk("./keys"), "raw_devices.keys.source", `${home}/.ssh`],
        ["raw_devices ~", disk("~"), "raw_devices.keys.source", home],
        ["raw_devices ${HOME}", disk("${HOME}"), "raw_devices.keys.source", home],
        ["raw_devices /", disk("/"), "raw_devices.keys.source", "/"],
        [
          "raw_devices a block device",
          { raw_devices: { sda: { type: "unix-block", source: "/dev/sda", path: "/dev/sda" } } },
          "raw_devices.sda.type",
          "unix-block",
        ],
        ["raw.lxc ~/.ssh", lxc(`${home}/.ssh`), "raw_config.raw.lxc", "raw.lxc"],
        ["raw.lxc ~", lxc(home), "raw_config.raw.lxc", "raw.lxc"],
        ["raw.lxc /", lxc("/"), "raw_config.raw.lxc", "raw.lxc"],
      ];
      for (const [what, over, key, path] of attempts) {
        const spec = { name, image: LIVE_IMAGE, command: ["sleep", "infinity"], ...over };
        const r = await rpc.call("sandbox.create", { spec });
        assert.equal(r.error?.code, "invalid", `${what}: ${JSON.stringify(r).slice(0, 400)}`);
        assert.ok(r.error!.message.includes(key), `${what}: ${r.error!.message}`);
        assert.ok(r.error!.message.includes(path), `${what}: ${r.error!.message}`);
        assert.ok(!JSON.stringify(r).includes(KEY), what);
      }

      // the same through compose: ${HOME} interpolated from the server's environment
      const composes: [string, string, string][] = [
        [
          "raw_devices: {keys: {type: disk, source: '${HOME}/.ssh', path: /mnt/keys, shift: 'true'}}",
          "raw_devices.keys.source",
          `${home}/.ssh`,
        ],
        [
          "raw_devices: {keys: {type: disk, source: '${HOME}', path: /mnt/keys}}",
          "raw_devices.keys.source",
          home,
        ],
        [
          "raw_devices: {keys: {type: disk, source: /, path: /mnt/keys}}",
          "raw_devices.keys.source",
          "/ holds",
        ],
        [
          "raw_config: {raw.lxc: 'lxc.mount.entry = ${HOME}/.ssh mnt/keys none bind,create=dir 0 0'}",
          "raw_config.raw.lxc",
          "raw.lxc",
        ],
        // docker's `devices:` is not an isb key: the loader refuses the document (`parse`)
        ["devices: ['/dev/sda:/dev/sda']", "`devices` is not an isb key", "raw_devices"],
      ];
      for (const [i, [line, key, path]] of composes.entries()) {
        await Deno.writeTextFile(
          `${home}/isb-${i}.yaml`,
          `services:\n  web:\n    image: ${LIVE_IMAGE}\n    container_name: ${name}\n` +
            `    command: [sleep, infinity]\n    ${line}\n`,
        );
        const r = await rpc.call("compose.up", { files: [`./isb-${i}.yaml`] });
        const code = line.startsWith("devices:") ? "parse" : "invalid";
        assert.equal(r.error?.code, code, `${line}: ${JSON.stringify(r).slice(0, 400)}`);
        assert.ok(r.error!.message.includes(key), `${line}: ${r.error!.message}`);
        assert.ok(r.error!.message.includes(path), `${line}: ${r.error!.message}`);
        assert.ok(!JSON.stringify(r).includes(KEY), line);
      }

      const left = await incus.listInstances();
      assert.deepEqual(left.map((i) => i.name), [], "nothing was created in the project");

      // the control: the project and the check let a project directory through
      const spec = {
        name: ok,
        image: LIVE_IMAGE,
        command: ["sleep", "infinity"],
        raw_devices: { work: { type: "disk", source: "./work", path: "/mnt/work", shift: "true" } },
      };
      const created = await rpc.call("sandbox.create", { spec });
      assert.equal(created.error, undefined, JSON.stringify(created.error));
      const cat = await rpc.call("sandbox.exec", {
        name: ok,
        argv: ["cat", "/mnt/work/hello.txt"],
        stream: true,
      });
      assert.equal(streamText(cat), "hello\n", JSON.stringify(cat).slice(0, 400));
    } finally {
      for (const i of await incus.listInstances().catch(() => [])) {
        await removeInstance(incus, i.name);
      }
      if (made) await base.call("DELETE", `/1.0/projects/${project}`).catch(() => {});
      base.close();
      await Deno.remove(home, { recursive: true });
    }
  },
});
