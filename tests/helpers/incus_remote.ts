/**
 * This host's incusd as an Incus *remote*, the way a user sets one up: `core.https_address`
 * on loopback (127.0.0.1:8443, left set as scripts/host-setup.sh sets it, so tests running
 * side by side never move it under each other), a trust token from `incus config trust add`,
 * and a throwaway incus client config (`INCUS_CONF`) made by the real
 * `incus remote add NAME URL --token …`: config.yml, a fresh client certificate and the
 * pinned server certificate. Disposal removes the trust and the directory.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type IncusClient, isNotFound } from "../../rpc/mod.ts";

/** The loopback address remote tests use when incusd listens on none. */
export const HTTPS_ADDRESS = "127.0.0.1:8443";

/** A trusted incus client configuration naming this host as a remote. */
export interface LiveRemote extends AsyncDisposable {
  /** The remote's name in `config.yml`. */
  name: string;
  /** `https://127.0.0.1:PORT`. */
  url: string;
  /** The `INCUS_CONF` directory. */
  conf: string;
}

/** Makes incusd listen on loopback (if it listens nowhere yet); returns `https://host:port`. */
export async function ensureHttps(c: IncusClient): Promise<string> {
  const info = await c.serverInfo();
  let addr = String(info.config["core.https_address"] ?? "");
  if (!addr) {
    await c.call("PATCH", "/1.0", { body: { config: { "core.https_address": HTTPS_ADDRESS } } });
    addr = HTTPS_ADDRESS;
  }
  const port = addr.split(":").pop() || "8443";
  return `https://127.0.0.1:${port}`;
}

async function incus(args: string[], env: Record<string, string> = {}): Promise<string> {
  const out = await new Deno.Command("incus", { args, env, stdin: "null" }).output();
  const dec = (b: Uint8Array) => new TextDecoder().decode(b);
  assert.ok(out.success, `incus ${args[0]} ${args[1]}: ${dec(out.stderr)}`);
  return dec(out.stdout);
}

/** The SHA-256 fingerprint of a PEM certificate (how incusd names trusted certificates). */
export async function pemFingerprint(pem: string): Promise<string> {
  const der = pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
  const raw = Uint8Array.from(atob(der), (ch) => ch.charCodeAt(0));
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", raw));
  return [...hash].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** A trusted remote `name` for this host in a fresh `INCUS_CONF` (see the module doc). */
export async function liveRemote(c: IncusClient, name: string): Promise<LiveRemote> {
  const url = await ensureHttps(c);
  const conf = await Deno.makeTempDir({ prefix: "isx-incus-conf-" });
  let fingerprint = "";
  try {
    const token = (await incus(["config", "trust", "add", name, "--quiet"])).trim();
    await incus(["remote", "add", name, url, "--token", token, "--accept-certificate"], {
      INCUS_CONF: conf,
    });
    fingerprint = await pemFingerprint(await Deno.readTextFile(`${conf}/client.crt`));
  } catch (e) {
    await incus(["config", "trust", "revoke-token", name]).catch(() => {});
    await Deno.remove(conf, { recursive: true });
    throw e;
  }
  return {
    name,
    url,
    conf,
    async [Symbol.asyncDispose]() {
      await Deno.remove(conf, { recursive: true });
      // a busy incusd may time the first attempt out: never leave a trusted certificate behind
      for (let i = 0; i < 5; i++) {
        const r = await c.call("DELETE", `/1.0/certificates/${fingerprint}`).then(
          () => "gone",
          (e) => (isNotFound(e) ? "gone" : "retry"),
        );
        if (r === "gone") return;
        await new Promise((res) => setTimeout(res, 2000));
      }
      throw new Error(`could not remove the trusted test certificate ${fingerprint}`);
    },
  };
}
