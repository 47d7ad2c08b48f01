import { equal, match, ok, rejects, throws } from "node:assert/strict";
import { connLimitRemoveScript, connLimitScript, installConnLimit } from "./conn_limit.ts";

Deno.test("connLimitScript limits each source address on the proxy's ports, v4 and v6", () => {
  const s = connLimitScript({ ports: [3128, 443, 443], perSource: 512 }, "isx_t");
  match(s, /^table inet isx_t\ndelete table inet isx_t\ntable inet isx_t \{/);
  match(s, /tcp dport \{ 443, 3128 \} ct state new add @src4 \{ ip saddr ct count over 512 \}/);
  match(s, /add @src6 \{ ip6 saddr ct count over 512 \} reject with tcp reset/);
  equal(connLimitRemoveScript("isx_t"), "table inet isx_t\ndelete table inet isx_t\n");
  const scoped = connLimitScript({
    ports: [443],
    perSource: 2,
    interfaces: ["incusbr0", "isxproxy0"],
  });
  match(scoped, /iifname \{ "incusbr0", "isxproxy0" \} tcp dport \{ 443 \} ct state new/);
  throws(() => connLimitScript({ ports: [443], perSource: 2, interfaces: ['x" accept #'] }));
});

Deno.test("connLimitScript refuses an empty port list and a non-positive limit", () => {
  throws(() => connLimitScript({ ports: [], perSource: 5 }), RangeError);
  throws(() => connLimitScript({ ports: [0, 70000], perSource: 5 }), RangeError);
  throws(() => connLimitScript({ ports: [443], perSource: 0 }), RangeError);
});

Deno.test("installConnLimit keeps serving when nft is refused, and removes what it wrote", async () => {
  const seen: string[] = [];
  const off = await installConnLimit(() => Promise.reject(new TypeError("nft: denied")), {
    ports: [443],
    perSource: 4,
  });
  await off(); // a limit that never held removes nothing
  const remove = await installConnLimit(
    (s) => {
      seen.push(s);
      return Promise.resolve();
    },
    { ports: [443], perSource: 4 },
    "isx_t2",
  );
  ok(seen[0]!.includes("count over 4"));
  await remove();
  equal(seen[1], connLimitRemoveScript("isx_t2"));
  await rejects(installConnLimit(() => Promise.resolve(), { ports: [1], perSource: 1 }, "Bad"));
});
