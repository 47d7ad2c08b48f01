/**
 * The one place a template or tool names a host path: `files[].source`, whose bytes are
 * copied into every instance built from it. It goes through isb rpc's canonical check
 * (rpc/host_paths.ts): a source that is or leads into `~/.ssh`,
 * `credentials.yaml`, the isx state or another credential store is refused unread, in every
 * spelling; a template cannot name devices, config keys or mounts at all.
 */
import assert from "node:assert/strict";
import { IsbError } from "../../rpc/errors.ts";
import { loadDefinitions } from "./load.ts";
import { parseTemplate } from "./schema.ts";

const SECRET = "PRIVATE-KEY-for-load-test";

Deno.test("loadDefinitions refuses a files source in, linking to, or below a protected path, unread", async () => {
  const home = await Deno.makeTempDir({ prefix: "i-paths-home-" });
  try {
    await Deno.mkdir(`${home}/.ssh`);
    await Deno.writeTextFile(`${home}/.ssh/id_test`, SECRET);
    await Deno.mkdir(`${home}/.config/isx/templates`, { recursive: true });
    await Deno.writeTextFile(`${home}/.config/isx/credentials.yaml`, SECRET);
    await Deno.mkdir(`${home}/.local/state/isx/ca`, { recursive: true });
    await Deno.writeTextFile(`${home}/.local/state/isx/ca/ca.key`, SECRET);
    const proj = `${home}/proj`;
    await Deno.mkdir(`${proj}/.isx/templates`, { recursive: true });
    await Deno.writeTextFile(`${proj}/.isx/templates/ok.txt`, "fine");
    await Deno.symlink(`${home}/.ssh/id_test`, `${proj}/.isx/templates/key`);
    await Deno.symlink(`${home}/.ssh`, `${proj}/.isx/templates/dir`);
    await Deno.symlink(`${home}/.config/isx/credentials.yaml`, `${proj}/.isx/templates/creds`);
    const sources: [string, string][] = [
      ["~/.ssh/id_test", `${home}/.ssh`],
      ["${HOME}/.ssh/id_test", `${home}/.ssh`],
      [`${home}/./.ssh//id_test`, `${home}/.ssh`],
      ["../../../.ssh/id_test", `${home}/.ssh`],
      ["key", `${home}/.ssh`],
      ["./dir/id_test", `${home}/.ssh`],
      ["creds", `${home}/.config/isx/credentials.yaml`],
      ["~/.local/state/isx/ca/ca.key", `${home}/.local/state/isx`],
      ["/etc/shadow", "/etc/shadow"],
    ];
    for (const [source, root] of sources) {
      await Deno.writeTextFile(
        `${proj}/.isx/templates/t.yaml`,
        `files:\n  - {path: /root/k, source: ${JSON.stringify(source)}}\n`,
      );
      assert.throws(
        () =>
          loadDefinitions({
            configDir: `${home}/.config/isx`,
            cwd: proj,
            home,
            protectedPaths: [`${home}/.local/state/isx`],
          }),
        (e: unknown) => {
          assert.ok(e instanceof IsbError, `${source}: ${e}`);
          assert.equal(e.code, "invalid", source);
          assert.ok(e.message.includes('field "files[0].source"'), e.message);
          assert.ok(e.message.includes(` is under ${root}, which isx never reads`), e.message);
          assert.ok(!e.message.includes(SECRET));
          return true;
        },
        source,
      );
    }
    await Deno.writeTextFile(
      `${proj}/.isx/templates/t.yaml`,
      "files:\n  - {path: /root/k, source: ok.txt}\n",
    );
    const defs = loadDefinitions({ configDir: `${home}/.config/isx`, cwd: proj, home });
    assert.equal(new TextDecoder().decode(defs.templates.get("t")!.files[0]!.data), "fine");
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("parseTemplate refuses devices, config keys and mounts: a template cannot name them", () => {
  for (
    const field of [
      { devices: { keys: { type: "disk", source: "/root/.ssh", path: "/k" } } },
      { config: { "raw.lxc": "lxc.mount.entry = /root/.ssh mnt none bind" } },
      { "raw.lxc": "x" },
      { volumes: ["~/.ssh:/k"] },
      { mounts: [{ source: "/", target: "/host" }] },
      { profiles: ["with-disk"] },
    ]
  ) {
    assert.throws(() => parseTemplate("t.yaml", field, "t"), (e: unknown) => {
      assert.ok(e instanceof IsbError && e.code === "invalid", String(e));
      return true;
    }, JSON.stringify(field));
  }
});
