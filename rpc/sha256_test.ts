import assert from "node:assert/strict";
import { sha256Hex } from "./sha256.ts";

async function webCrypto(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  return [...d].map((x) => x.toString(16).padStart(2, "0")).join("");
}

Deno.test("sha256Hex matches the FIPS 180-4 examples", () => {
  assert.equal(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  assert.equal(
    sha256Hex("abc"),
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
  );
  assert.equal(
    sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
  );
});

Deno.test("sha256Hex matches Web Crypto at every length around the block borders", async () => {
  const src = crypto.getRandomValues(new Uint8Array(300));
  for (let n = 0; n <= 300; n++) {
    const b = src.subarray(0, n);
    assert.equal(sha256Hex(b), await webCrypto(b), `length ${n}`);
  }
  const big = new Uint8Array(1 << 20);
  for (let i = 0; i < big.length; i += 65536) crypto.getRandomValues(big.subarray(i, i + 65536));
  assert.equal(sha256Hex(big), await webCrypto(big));
});

Deno.test("sha256Hex hashes a string as its UTF-8 bytes", async () => {
  const s = "héllo ✓ 𝄞";
  assert.equal(sha256Hex(s), await webCrypto(new TextEncoder().encode(s)));
});
