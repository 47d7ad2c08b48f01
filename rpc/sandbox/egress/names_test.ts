import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  egressAclBody,
  egressAclName,
  egressDigest8,
  egressDnsmasq,
  egressNetworkConfig,
  egressNetworkName,
  egressPlaceholder,
  egressPlan,
} from "./names.ts";

/** Computed independently of the module: hex of SHA-256 of `s`. */
function sha(s: string): string {
  return createHash("sha256").update(Buffer.from(s, "utf8")).digest("hex");
}

const NAMES = [
  { project: "default", instance: "plugin" },
  { project: "isb-acme", instance: "plugin" },
  { project: "default", instance: "web-1" },
];

for (const c of NAMES) {
  Deno.test(`egressNetworkName derives bridge and ACL for ${c.project}/${c.instance}`, () => {
    const d8 = sha(`isb-egress\0${c.project}\0${c.instance}`).slice(0, 8);
    assert.equal(egressDigest8(c.project, c.instance), d8);
    assert.equal(egressNetworkName(c.project, c.instance), `isbbrx${d8}`);
    assert.equal(egressNetworkName(c.project, c.instance).length, 14);
    assert.equal(egressAclName(c.project, c.instance), `isbx-${d8}`);
  });
}

Deno.test("egressNetworkName differs per project and per instance", () => {
  const n = egressNetworkName("default", "plugin");
  assert.notEqual(n, egressNetworkName("isb-acme", "plugin"));
  assert.notEqual(n, egressNetworkName("default", "other"));
});

Deno.test("egressPlaceholder is isb_placeholder_ and 16 bytes of SHA-256 of bridge and env", () => {
  const bridge = egressNetworkName("default", "web");
  const want = `isb_placeholder_${sha(`isb-egress-placeholder\0${bridge}\0GH_TOKEN`).slice(0, 32)}`;
  assert.equal(egressPlaceholder(bridge, "GH_TOKEN"), want);
});

Deno.test("egressPlan gives the NIC, the config keys and placeholders", () => {
  const p = egressPlan(
    {
      allow: ["*.cdn.net:8443"],
      secrets: [{ env: "TOKEN", secret: "gh", hosts: ["API.github.com."] }],
    },
    "default",
    "web",
  );
  const bridge = egressNetworkName("default", "web");
  const ph = egressPlaceholder(bridge, "TOKEN");
  assert.deepStrictEqual(p.nic, {
    type: "nic",
    name: "eth0",
    network: bridge,
    "security.acls": egressAclName("default", "web"),
    "security.acls.default.egress.action": "drop",
    "security.acls.default.ingress.action": "allow",
  });
  assert.equal(p.config["user.isb.egress-for"], "default/web");
  assert.equal(p.config["environment.TOKEN"], ph);
  for (const k of ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"]) {
    assert.equal(p.config[`environment.${k}`], "/etc/isb/egress-ca-bundle.pem");
  }
  assert.equal(p.config["environment.NODE_EXTRA_CA_CERTS"], "/etc/isb/egress-ca.crt");
  assert.deepStrictEqual(JSON.parse(p.config["user.isb.egress"]!), {
    entries: ["api.github.com:443", "*.cdn.net:8443"],
    instance: "web",
    project: "default",
    secrets: [{ env: "TOKEN", hosts: ["api.github.com:443"], placeholder: ph, secret: "gh" }],
  });
});

Deno.test("egressPlan without secrets sets no CA keys", () => {
  const p = egressPlan(["a.example.com"], "default", "web");
  assert.deepStrictEqual(Object.keys(p.config).sort(), ["user.isb.egress", "user.isb.egress-for"]);
});

Deno.test("egressDnsmasq answers only allowed names, domains for wildcards", () => {
  const p = egressPlan(["api.example.com", "*.cdn.net:8443"], "default", "plugin");
  assert.equal(
    egressDnsmasq(p.policy, "10.9.8.1"),
    "no-resolv\nno-hosts\naddress=/#/\naddress=/api.example.com/10.9.8.1\naddress=/cdn.net/10.9.8.1",
  );
  assert.equal(egressDnsmasq(egressPlan("none", "default", "plugin").policy, "10.9.8.1"), "");
});

Deno.test("egressNetworkConfig leaves a none bridge without address and DNS", () => {
  const none = egressNetworkConfig(egressPlan("none", "default", "plugin"), { created: 1 });
  assert.equal(none["ipv4.address"], "none");
  assert.equal(none["raw.dnsmasq"], undefined);
  const some = egressNetworkConfig(egressPlan(["a.example.com"], "default", "plugin"), {
    ip: "10.9.8.1",
    created: 7,
  });
  assert.equal(some["ipv4.address"], "auto");
  assert.ok(some["raw.dnsmasq"]!.includes("address=/a.example.com/10.9.8.1"));
  assert.equal(some["user.isb.egress-created"], "7");
  for (const c of [none, some]) {
    assert.equal(c["ipv4.nat"], "false");
    assert.equal(c["ipv4.routing"], "false");
    assert.equal(c["ipv6.address"], "none");
    assert.equal(c["user.isb.egress-for"], "default/plugin");
  }
});

Deno.test("egressAclBody allows TCP to the bridge address on the policy's ports only", () => {
  const p = egressPlan(
    ["a.example.com", "b.example.com:8443", "c.example.com:80"],
    "default",
    "plugin",
  );
  assert.deepStrictEqual(egressAclBody(p, "10.9.8.1"), {
    description: "isb egress for default/plugin",
    ingress: [],
    egress: [{
      action: "allow",
      state: "enabled",
      protocol: "tcp",
      destination: "10.9.8.1/32",
      destination_port: "80,443,8443",
      description: "the egress proxy",
    }],
    config: { "user.isb.egress-for": "default/plugin" },
  });
  assert.deepStrictEqual(egressAclBody(egressPlan([], "default", "plugin"), "").egress, []);
});
