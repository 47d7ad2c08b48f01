import assert from "node:assert/strict";
import { retargetProxyText } from "./retarget.ts";
import { environmentText, guestEnv, profileText } from "../templates/steps.ts";

const ENV = guestEnv({ caPem: "", gateway: "10.77.0.1", domains: ["api.anthropic.com"] });

Deno.test("retargetProxyText points the profile's proxy variables at another gateway", () => {
  const out = retargetProxyText(profileText(ENV), "10.78.254.1");
  assert.equal(
    out,
    profileText(guestEnv({ caPem: "", gateway: "10.78.254.1", domains: ["api.anthropic.com"] })),
  );
  assert.doesNotMatch(out, /10\.77\.0\.1/);
});

Deno.test("retargetProxyText rewrites /etc/environment and keeps the port and other lines", () => {
  const env = { ...ENV, HTTPS_PROXY: "http://10.77.0.1:8888", OTHER: "http://10.77.0.1:1/" };
  const out = retargetProxyText(environmentText(env), "10.78.1.1");
  assert.match(out, /^HTTPS_PROXY="http:\/\/10\.78\.1\.1:8888"$/m);
  assert.match(out, /^http_proxy="http:\/\/10\.78\.1\.1:3128"$/m);
  assert.match(out, /^OTHER="http:\/\/10\.77\.0\.1:1\/"$/m);
});

Deno.test("retargetProxyText refuses a gateway that is not an IPv4 address", () => {
  assert.throws(() => retargetProxyText("", "evil;rm"), RangeError);
});
