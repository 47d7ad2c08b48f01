/**
 * `isb rpc` started from a `$HOME` of our own against the real Incus, as a client that wants
 * the host user's keys inside a sandbox it controls: a bind mount of `~/.ssh` (directly,
 * through a symlink, or by mounting `~`) and a compose secret file linking into the isx
 * configuration are refused with `invalid`, and no instance is created.
 */

import assert from "node:assert/strict";
import { isNotFound } from "../../rpc/mod.ts";
import {
  LIVE_ARGS,
  LIVE_IMAGE,
  liveIncus,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";
import { RpcClient } from "../helpers/rpc_client.ts";

const DENO_DIR = Deno.env.get("DENO_DIR") || `${Deno.env.get("HOME")}/.cache/deno`;

Deno.test({
  name: "isb rpc from $HOME will not mount or copy the user's keys into a real sandbox",
  ignore: NO_INCUS,
  async fn() {
    const incus = liveIncus();
    const home = await Deno.makeTempDir({ prefix: "isb-home-" });
    const name = testName("hard-prot");
    try {
      await Deno.mkdir(`${home}/.ssh`);
      await Deno.writeTextFile(`${home}/.ssh/id_ed25519`, "PRIVATE KEY\n");
      await Deno.mkdir(`${home}/.config/isx`, { recursive: true });
      await Deno.writeTextFile(`${home}/.config/isx/credentials.yaml`, "anthropic: {}\n");
      await Deno.symlink(`${home}/.ssh`, `${home}/keys`);
      await Deno.symlink(`${home}/.config/isx/credentials.yaml`, `${home}/token.txt`);
      await using rpc = await RpcClient.start([...LIVE_ARGS], {
        cwd: home,
        env: { HOME: home, XDG_CONFIG_HOME: "", XDG_STATE_HOME: "", DENO_DIR },
      });
      for (const source of ["~/.ssh", "./keys", "~"]) {
        const spec = { name, image: LIVE_IMAGE, volumes: [`${source}:/mnt/k`] };
        const r = await rpc.call("sandbox.create", { spec });
        const err = r.error as { code: string; message: string } | undefined;
        assert.equal(err?.code, "invalid", `${source}: ${JSON.stringify(r).slice(0, 300)}`);
        assert.match(err!.message, /isb rpc never (reads|exposes)/);
      }
      await Deno.writeTextFile(
        `${home}/isb.yaml`,
        `secrets:\n  k: {file: ./token.txt}\nservices:\n  web:\n    image: ${LIVE_IMAGE}\n` +
          `    container_name: ${name}\n    command: [sleep, infinity]\n    secrets: [k]\n`,
      );
      const up = await rpc.call("compose.up", { files: ["./isb.yaml"] });
      const err = up.error as { code: string; message: string } | undefined;
      assert.equal(err?.code, "invalid", JSON.stringify(up).slice(0, 300));
      assert.match(err!.message, /^secret "k": file .* is under .*\.config\/isx, which isb rpc/);
      await assert.rejects(incus.getInstance(name), (e) => isNotFound(e), "nothing created");
    } finally {
      await removeInstance(incus, name);
      incus.close();
      await Deno.remove(home, { recursive: true });
    }
  },
});
