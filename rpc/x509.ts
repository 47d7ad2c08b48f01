/**
 * `@peculiar/x509` (on Deno's WebCrypto), loaded on first use. With `reflect-metadata` it
 * costs about 200 ms to import, which every start of the program paid while it was imported
 * statically (`isx list`, `isb rpc`), though only CA creation and leaf signing need it.
 *
 * @module
 */

import type * as X509 from "@peculiar/x509";

/** The x509 module's namespace type. */
export type X509Lib = typeof X509;

let loading: Promise<X509Lib> | undefined;

/** The x509 library, imported (once) with its reflect polyfill and Deno's WebCrypto set. */
export function x509Lib(): Promise<X509Lib> {
  loading ??= (async () => {
    await import("reflect-metadata");
    const lib = await import("@peculiar/x509");
    lib.cryptoProvider.set(crypto);
    return lib;
  })();
  return loading;
}

/** The DER bytes of the first certificate in a PEM text. */
export function pemToDer(pem: string): Uint8Array<ArrayBuffer> {
  const m = /-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/.exec(pem);
  if (!m) throw new TypeError("no PEM certificate in the text");
  const bin = atob(m[1]!.replace(/\s+/g, ""));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
