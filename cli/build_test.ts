import assert from "node:assert/strict";
import { npmHostEnv } from "./build.ts";

Deno.test("npmHostEnv passes the host's registry trust and proxy through, and nothing else", () => {
  const env = npmHostEnv({
    PATH: "/p",
    HOME: "/h",
    NODE_EXTRA_CA_CERTS: "/etc/ssl/ca.pem",
    HTTPS_PROXY: "",
    ANTHROPIC_API_KEY: "sk-real",
  }, "/fallback");
  assert.deepEqual(env, { PATH: "/p", HOME: "/h", NODE_EXTRA_CA_CERTS: "/etc/ssl/ca.pem" });
  assert.deepEqual(npmHostEnv({}, "/fallback"), {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    HOME: "/fallback",
  });
});
