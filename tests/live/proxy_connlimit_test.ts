/**
 * The kernel connection limit (proxy/callers/conn_limit.ts) attacked from inside a real container:
 * root in the guest opens more TCP connections to a proxy port than its source address may
 * hold, while the host side keeps every accepted socket open (as Deno does with a TLS
 * connection that never sent its ClientHello). Only `perSource` get through; the rest are
 * reset; once the limit is removed a new connection gets through again.
 */

import { equal } from "node:assert/strict";
import {
  LIVE_BRIDGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";
import { createIncusClient } from "../../rpc/mod.ts";
import { bridgeGateway } from "../../proxy/host/dns.ts";
import { nftBinary } from "../../proxy/callers/guard.ts";
import { installConnLimit } from "../../proxy/callers/conn_limit.ts";
import { launchPinned } from "./_pinned.ts";

const dec = new TextDecoder();
const OPEN = `
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held, ok = [], 0
for _ in range(n):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((host, port)); held.append(s); ok += 1
    except OSError:
        s.close()
print(ok)
`;

Deno.test({
  name:
    "proxy: a guest holds at most perSource connections to a proxy port, however the proxy drops them",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const name = testName("cl");
    const gateway = await bridgeGateway(incus, LIVE_BRIDGE);
    if (!gateway) throw new TypeError("the lab bridge has no IPv4 address");
    const listener = Deno.listen({ hostname: gateway, port: 0, transport: "tcp" });
    const port = (listener.addr as Deno.NetAddr).port;
    const held: Deno.Conn[] = [];
    const accepting = (async () => {
      for await (const c of listener) held.push(c); // never read, never closed until the end
    })();
    const table = `isx_connlimit_isxtest${crypto.randomUUID().slice(0, 8)}`; // a test-made name (lab.ts)
    let remove = () => Promise.resolve();
    try {
      remove = await installConnLimit(nftBinary(), {
        ports: [port],
        perSource: 5,
        interfaces: [LIVE_BRIDGE],
      }, table);
      await launchPinned(incus, name, { image: "dev-base" });
      const run = async (n: number) => {
        const r = await incus.execCapture(
          name,
          ["python3", "-c", OPEN, gateway, `${port}`, `${n}`],
          {
            timeoutMs: 120_000,
          },
        );
        return Number(dec.decode(r.stdout).trim());
      };
      equal(await run(12), 5, "only perSource connections get through; the others are reset");
      equal(held.length, 5, "the host accepted exactly those");
      await remove();
      remove = () => Promise.resolve();
      equal(await run(3), 3, "without the limit, new connections get through");
    } finally {
      await remove();
      listener.close();
      await accepting.catch(() => {});
      for (const c of held) c.close();
      await removeInstance(incus, name).catch(() => {});
      incus.close();
    }
  },
});
