import assert from "node:assert/strict";
import { deviceNameForPath, fnv1a32 } from "./devices.ts";

Deno.test("deviceNameForPath lowercases, squeezes and trims", () => {
  for (
    const [p, want] of [["/home/dev/src", "home-dev-src"], ["/Home//Dev_X/", "home-dev-x"], [
      "/",
      "mount",
    ]]
  ) {
    assert.equal(deviceNameForPath(p!), want);
  }
});

Deno.test("deviceNameForPath shortens names over 48 chars with an FNV-1a-32 suffix", () => {
  const p = "/home/dev/projects/some-really-long-name/node_modules/.cache/vite";
  const full = "home-dev-projects-some-really-long-name-node-modules-cache-vite";
  const want = `${full.slice(full.length - 39).replace(/^-+/, "")}-${
    fnv1a32(p).toString(16).padStart(8, "0")
  }`;
  assert.equal(deviceNameForPath(p), want);
  assert.ok(deviceNameForPath(p).length <= 48);
  assert.equal(fnv1a32(""), 0x811c9dc5);
  assert.equal(fnv1a32("a"), 0xe40c292c);
  assert.equal(fnv1a32("foobar"), 0xbf9cf968);
});
