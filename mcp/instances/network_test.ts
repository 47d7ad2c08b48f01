import assert from "node:assert/strict";
import {
  aclName,
  DEFAULT_PROXY_PORTS,
  KEY_ISX_ROLE,
  pickFreeSubnet,
  proxyOnlyAcl,
  proxyOnlyNetworkConfig,
  proxyOnlyNic,
  ROLE_PROXY_ONLY,
} from "./network.ts";

Deno.test("proxyOnlyAcl allows only the proxy ports and DNS on the gateway", () => {
  const acl = proxyOnlyAcl("10.78.254.1", DEFAULT_PROXY_PORTS);
  assert.deepEqual(
    acl.egress.map((r) => [r.action, r.protocol, r.destination, r.destination_port]),
    [
      ["allow", "tcp", "10.78.254.1/32", "443,3128"],
      ["allow", "udp", "10.78.254.1/32", "53"],
      ["allow", "tcp", "10.78.254.1/32", "53"],
    ],
  );
  assert.deepEqual(acl.ingress, []);
  assert.equal(acl.config[KEY_ISX_ROLE], ROLE_PROXY_ONLY);
});

Deno.test("proxyOnlyAcl follows configured ports", () => {
  const acl = proxyOnlyAcl("10.0.0.1", { tls: 8443, forward: 8443 });
  assert.equal(acl.egress[0]!.destination_port, "8443");
});

Deno.test("proxyOnlyNetworkConfig binds the ACL on the bridge, without NAT, routing or IPv6", () => {
  const c = proxyOnlyNetworkConfig({
    address: "10.78.254.1/24",
    acl: aclName("isxproxy0"),
    mtu: "1400",
  });
  assert.deepEqual(c, {
    "ipv4.address": "10.78.254.1/24",
    "ipv4.nat": "false",
    "ipv4.routing": "false",
    "ipv6.address": "none",
    "bridge.mtu": "1400",
    "security.acls": "isx-proxy-only-isxproxy0",
    "security.acls.default.egress.action": "reject",
    "security.acls.default.ingress.action": "reject",
    "user.isx.role": "proxy-only",
  });
  assert.equal(proxyOnlyNetworkConfig({ address: "a", acl: "b" })["bridge.mtu"], undefined);
});

Deno.test("proxyOnlyNic puts eth0 on the bridge with port isolation and no per-NIC ACL", () => {
  const nic = proxyOnlyNic("isxproxy0");
  assert.deepEqual(nic, {
    type: "nic",
    name: "eth0",
    network: "isxproxy0",
    "security.port_isolation": "true",
  });
});

Deno.test("pickFreeSubnet counts down from .254 and skips used subnets", () => {
  assert.equal(pickFreeSubnet("10.78.0.0/16", []), "10.78.254.1/24");
  assert.equal(
    pickFreeSubnet("10.78.0.0/16", ["10.78.254.1/24", "10.77.0.1/24", "10.78.253.1/24", "auto"]),
    "10.78.252.1/24",
  );
  const all = Array.from({ length: 254 }, (_, i) => `10.78.${i + 1}.1/24`);
  assert.throws(() => pickFreeSubnet("10.78.0.0/16", all), /no free \/24 left/);
  assert.throws(() => pickFreeSubnet("10.78.0.0/24", []), /expected A.B.0.0\/16/);
});
