/**
 * TLS interception: the host CA (`ca.ts`, the only TLS-library code), the leaf certificate per
 * server name it signs on first use (`leaf_cache.ts`, written as DER by `_leaf_der.ts`),
 * listeners that pick the certificate by SNI through Deno's hook (`sni.ts`), and the
 * intercepting server for one CA and one set of names (`intercept.ts`: the relay on each listen
 * address, the `Deno.serve` handler behind it on loopback).
 *
 * @module
 */

export { type CaInfo, CaSigner, ensureCa, loadCa } from "./ca.ts";
