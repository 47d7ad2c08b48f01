/**
 * `idmap: "auto"` on a host set up by scripts/host-setup.sh: a real `isb rpc` creates a
 * dev-base sandbox with a bind mount of a host directory owned by uid 1000 (writable by its
 * owner only), and `dev` (uid 1000 in the guest) writes through it; the file lands on the
 * host owned by 1000. The same sandbox with `idmap: "none"` cannot write there (the guest's
 * 1000 is then a high host uid), so the mapping is what makes it work. Needs the
 * `root:1000:1` delegation in /etc/subuid and /etc/subgid (host-setup.sh adds it).
 */

import assert from "node:assert/strict";
import { LIVE_ARGS, liveIncus, NO_INCUS, removeInstance, testName } from "../helpers/live.ts";
import { RpcClient, unb64 } from "../helpers/rpc_client.ts";

const IMAGE = Deno.env.get("ISX_TEST_DEV_IMAGE") || "dev-base";
const DENO_DIR = Deno.env.get("DENO_DIR") || `${Deno.env.get("HOME")}/.cache/deno`;
const text = (b64: unknown) => new TextDecoder().decode(unb64(String(b64 ?? "")));

async function delegated(file: string): Promise<boolean> {
  const lines = (await Deno.readTextFile(file).catch(() => "")).split("\n");
  return lines.some((l) => l.trim() === "root:1000:1");
}

Deno.test({
  name: "sandbox.create with idmap auto lets dev write through a bind mount owned by uid 1000",
  ignore: NO_INCUS,
  async fn() {
    for (const f of ["/etc/subuid", "/etc/subgid"]) {
      assert.ok(await delegated(f), `${f} lacks root:1000:1: run scripts/host-setup.sh`);
    }
    const incus = liveIncus();
    const dir = await Deno.makeTempDir({ prefix: "isb-idmap-" });
    const mapped = testName("su-idmap");
    const unmapped = testName("su-noidmap");
    try {
      await Deno.chmod(dir, 0o755);
      await Deno.mkdir(`${dir}/shared`, { mode: 0o755 });
      await Deno.chown(`${dir}/shared`, 1000, 1000);
      await using rpc = await RpcClient.start([...LIVE_ARGS], {
        cwd: dir,
        env: { DENO_DIR },
      });
      const write = [
        "sh",
        "-c",
        "id -u; echo hello > /home/dev/shared/f; stat -c %u /home/dev/shared/f",
      ];

      const spec = (name: string, idmap: string) => ({
        name,
        image: IMAGE,
        idmap,
        volumes: ["./shared:/home/dev/shared"],
      });
      await rpc.ok("sandbox.create", { spec: spec(mapped, "auto") });
      const cfg = (await incus.getInstance(mapped)).value.config;
      assert.equal(cfg["raw.idmap"], "both 1000 1000");
      const r = await rpc.ok("sandbox.exec", { name: mapped, argv: write, user: "dev" }) as Record<
        string,
        unknown
      >;
      assert.equal(r.exit_code, 0, text(r.stderr));
      assert.equal(text(r.stdout), "1000\n1000\n");
      const st = await Deno.stat(`${dir}/shared/f`);
      assert.equal(st.uid, 1000);
      assert.equal(await Deno.readTextFile(`${dir}/shared/f`), "hello\n");
      await Deno.remove(`${dir}/shared/f`);

      // the control: without the mapping the guest's dev is not the directory's owner
      await rpc.ok("sandbox.create", { spec: spec(unmapped, "none") });
      const n = await rpc.ok("sandbox.exec", {
        name: unmapped,
        argv: write,
        user: "dev",
      }) as Record<
        string,
        unknown
      >;
      assert.notEqual(n.exit_code, 0);
      assert.match(text(n.stderr), /Permission denied/);
      await assert.rejects(Deno.stat(`${dir}/shared/f`), Deno.errors.NotFound);
    } finally {
      await removeInstance(incus, mapped);
      await removeInstance(incus, unmapped);
      incus.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
