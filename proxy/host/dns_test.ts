import { equal } from "node:assert/strict";
import { dnsBlockCurrent, dnsBlockGateway, gatewayOf, mergeDnsBlock } from "./dns.ts";

Deno.test("mergeDnsBlock adds, replaces and removes only its own block", () => {
  const user = "log-queries\naddress=/mine.test/10.0.0.9";
  const one = mergeDnsBlock(user, { names: ["api.anthropic.com"], gateway: "10.77.0.1" });
  equal(one.split("\n").slice(0, 2).join("\n"), user);
  equal(one.includes("address=/api.anthropic.com/10.77.0.1"), true);
  const two = mergeDnsBlock(one, { names: ["github.com"], gateway: "10.77.0.1" });
  equal(two.includes("api.anthropic.com"), false);
  equal(two.includes("address=/github.com/10.77.0.1"), true);
  equal(mergeDnsBlock(two, { names: [], gateway: "10.77.0.1" }), user);
  equal(
    mergeDnsBlock(mergeDnsBlock("", { names: ["a.test"], gateway: "1.2.3.4" }), {
      names: [],
      gateway: "1.2.3.4",
    }),
    "",
  );
  const both = mergeDnsBlock(one, {
    names: ["t.test"],
    gateway: "10.77.0.1",
    tag: "isx-proxy-test-1",
  });
  equal(mergeDnsBlock(both, { names: [], gateway: "10.77.0.1", tag: "isx-proxy-test-1" }), one);
});

Deno.test("gatewayOf strips the prefix and ignores none/auto", () => {
  equal(gatewayOf({ "ipv4.address": "10.77.0.1/24" }), "10.77.0.1");
  equal(gatewayOf({ "ipv4.address": "none" }), undefined);
  equal(gatewayOf({}), undefined);
});

Deno.test("dnsBlockGateway and dnsBlockCurrent read the proxy's block only", () => {
  const user = "address=/mine.test/10.0.0.9";
  equal(dnsBlockGateway(user), undefined);
  const raw = mergeDnsBlock(user, { names: ["api.anthropic.com"], gateway: "10.77.0.1" });
  equal(dnsBlockGateway(raw), "10.77.0.1");
  equal(dnsBlockCurrent(raw, { names: ["api.anthropic.com"], gateway: "10.77.0.1" }), true);
  equal(dnsBlockCurrent(raw + "\n", { names: ["api.anthropic.com"], gateway: "10.77.0.1" }), true);
  equal(dnsBlockCurrent(raw, { names: ["api.anthropic.com"], gateway: "10.77.0.2" }), false);
  equal(dnsBlockCurrent(user, { names: ["api.anthropic.com"], gateway: "10.77.0.1" }), false);
});
