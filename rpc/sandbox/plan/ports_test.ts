import assert from "node:assert/strict";
import { addPortSearching, splitAddr, tcpPortInUse } from "./ports.ts";
import { IsbError } from "../../errors.ts";

Deno.test("splitAddr splits proto, host and port, IPv6 bracketed", () => {
  assert.deepEqual(splitAddr("tcp:127.0.0.1:5173"), {
    proto: "tcp",
    host: "127.0.0.1",
    port: 5173,
  });
  assert.deepEqual(splitAddr("udp:[::1]:53"), { proto: "udp", host: "[::1]", port: 53 });
  for (const bad of ["unix:/x", "tcp:1.2.3.4:0", "tcp:h:1-2", "5173", "tcp:::1:5"]) {
    assert.equal(splitAddr(bad), undefined, bad);
  }
});

Deno.test("tcpPortInUse sees a bound loopback port and a free one", () => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = (l.addr as Deno.NetAddr).port;
    assert.equal(tcpPortInUse("127.0.0.1", port), true);
  } finally {
    l.close();
  }
  // An address this host does not have is not "in use": Incus judges it.
  assert.equal(tcpPortInUse("192.0.2.1", 80), false);
});

Deno.test("addPortSearching skips taken ports and Incus refusals, then settles", async () => {
  const tried: string[] = [];
  const listen = await addPortSearching({
    name: "web",
    device: "port-host-8000",
    props: { type: "proxy", listen: "tcp:127.0.0.1:8000", connect: "tcp:127.0.0.1:80" },
    search: 5,
    inUse: (_h, p) => p === 8000,
    add: (props) => {
      tried.push(props.listen!);
      if (props.listen === "tcp:127.0.0.1:8001") {
        return Promise.reject(new IsbError("api", "incusd: PUT x: busy (HTTP 400)"));
      }
      return Promise.resolve();
    },
  });
  assert.equal(listen, "tcp:127.0.0.1:8002");
  assert.deepEqual(tried, ["tcp:127.0.0.1:8001", "tcp:127.0.0.1:8002"]);
});

Deno.test("addPortSearching with no free port answers invalid naming the range and last error", async () => {
  const err = await addPortSearching({
    name: "web",
    device: "p",
    props: { listen: "tcp:127.0.0.1:8000" },
    search: 1,
    inUse: () => false,
    add: () => Promise.reject(new IsbError("operation_failed", "add port p failed: taken")),
  }).catch((e) => e);
  assert.ok(err instanceof IsbError);
  assert.equal(err.code, "invalid");
  assert.equal(
    err.message,
    "web: no free port for p in tcp:127.0.0.1:8000-8001 (last error: add port p failed: taken)",
  );
});

Deno.test("addPortSearching lets other errors through at once", async () => {
  let n = 0;
  await assert.rejects(
    addPortSearching({
      name: "web",
      device: "p",
      props: { listen: "tcp:127.0.0.1:8000" },
      search: 3,
      inUse: () => false,
      add: () => {
        n++;
        return Promise.reject(new IsbError("connect", "cannot connect"));
      },
    }),
    (e) => e instanceof IsbError && e.code === "connect",
  );
  assert.equal(n, 1);
});
