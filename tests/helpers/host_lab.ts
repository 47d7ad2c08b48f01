/**
 * A corner of the user's Incus for the host-client tests (issue 19: tests are guests): an
 * Incus project `ihost-<id>` whose default profile puts instances on a bridge `ihost<id>`
 * this lab makes, with a copy of a built template (same stamps, so `isx mcp` takes it as
 * built) in that project. Nothing lands in the user's project or on the user's bridge; the
 * source template is only read. `close()` removes everything, also after a failure.
 *
 * Why a copy of the user's built template rather than a build: `isx build` takes minutes
 * (apt in the guest); the copy is copy-on-write. Why the `incus` CLI: the project and profile
 * calls are needed only here, so rpc/incus stays as small as isb needs it.
 *
 * @module
 */

import { createIncusClient, type IncusClient, isNotFound } from "../../rpc/mod.ts";
import { LIVE_SOCKET } from "./live.ts";

const dec = new TextDecoder();

/** Runs `incus <args>`; throws with its stderr on failure. */
export async function incusCli(args: string[]): Promise<string> {
  const out = await new Deno.Command("incus", {
    args,
    stdout: "piped",
    stderr: "piped",
    env: { INCUS_SOCKET: LIVE_SOCKET },
  }).output();
  if (!out.success) {
    throw new Error(`incus ${args.join(" ")}: ${dec.decode(out.stderr).trim()}`);
  }
  return dec.decode(out.stdout);
}

/** A /24 in 10.79.0.0/16 that no bridge holds. */
async function freeSubnet(c: IncusClient): Promise<string> {
  const used = new Set(
    (await c.listNetworks()).map((n) =>
      n.config?.["ipv4.address"]?.split(".").slice(0, 3).join(".")
    ),
  );
  for (let i = 0; i < 50; i++) {
    const s = `10.79.${1 + Math.floor(Math.random() * 250)}`;
    if (!used.has(s)) return s;
  }
  throw new Error("no free /24 in 10.79.0.0/16");
}

/** The lab: `open()`, use, `close()` (or `await using`). */
export class HostLab implements AsyncDisposable {
  readonly id = crypto.randomUUID().replaceAll("-", "").slice(0, 6);
  readonly project = `ihost-${this.id}`;
  readonly bridge = `ihost${this.id}`;
  /** Its proxy-only bridge's name (made only by tests that need one). */
  readonly proxyOnlyBridge = `ihostp${this.id}`;
  /** The nft table prefix a test proxy of this lab uses. */
  readonly nftPrefix = `ihost_${this.id}`;
  /** The Incus client (default project) and one scoped to the lab's project. */
  readonly incus: IncusClient = createIncusClient({ socket: LIVE_SOCKET });
  readonly scoped: IncusClient = this.incus.withProject(this.project);
  gateway = "";
  #made = { bridge: false, project: false };

  /** Makes the bridge and the project, and copies `template` (default project) into it. */
  static async open(o: { template?: string } = {}): Promise<HostLab> {
    const lab = new HostLab();
    try {
      await lab.#open(o.template);
      return lab;
    } catch (e) {
      await lab.close();
      throw e;
    }
  }

  async #open(template: string | undefined): Promise<void> {
    const net = await freeSubnet(this.incus);
    await this.incus.createNetwork({
      name: this.bridge,
      type: "bridge",
      config: {
        "ipv4.address": `${net}.1/24`,
        "ipv4.nat": "false",
        "ipv6.address": "none",
        "user.isx.test": `i-host lab ${this.project}`,
      },
    }, { step: `create bridge ${this.bridge}` });
    this.#made.bridge = true;
    this.gateway = `${net}.1`;
    // the default project's images (read only), its own profiles and volumes
    await incusCli([
      "project",
      "create",
      this.project,
      "-c",
      "features.images=false",
      "-c",
      "features.profiles=true",
      "-c",
      "features.storage.volumes=true",
    ]);
    this.#made.project = true;
    const pool = (await incusCli(["profile", "device", "get", "default", "root", "pool"])).trim() ||
      "default";
    const inP = ["--project", this.project];
    await incusCli([
      "profile",
      "device",
      "add",
      "default",
      "root",
      "disk",
      "path=/",
      `pool=${pool}`,
      ...inP,
    ]);
    await incusCli([
      "profile",
      "device",
      "add",
      "default",
      "eth0",
      "nic",
      `network=${this.bridge}`,
      "name=eth0",
      ...inP,
    ]);
    if (template) {
      await incusCli([
        "copy",
        template,
        template,
        "--project",
        "default",
        "--target-project",
        this.project,
      ]);
    }
  }

  /** Removes every instance of the project, the project and the bridge. */
  async close(): Promise<void> {
    if (this.#made.project) {
      for (const i of await this.scoped.listInstances().catch(() => [])) {
        await this.scoped.stopInstance(i.name, { step: `stop ${i.name}`, force: true })
          .catch(() => {});
        await this.scoped.deleteInstance(i.name, { step: `delete ${i.name}` }).catch(() => {});
      }
      await incusCli(["project", "delete", this.project, "--force"]).catch(() =>
        incusCli(["project", "delete", this.project])
      ).catch(() => {});
    }
    if (this.#made.bridge) {
      for (let i = 0; i < 10; i++) {
        try {
          await this.incus.deleteNetwork(this.bridge, { step: `delete bridge ${this.bridge}` });
          break;
        } catch (e) {
          if (isNotFound(e)) break;
          await new Promise((r) => setTimeout(r, 1000)); // an instance's NIC still going away
        }
      }
    }
    this.incus.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
