/**
 * The Incus client: {@link createIncusClient} returns an {@link IncusClient} that speaks the
 * Incus REST API directly, over incusd's unix socket (or HTTPS with a client certificate
 * for a remote daemon).
 *
 * Why the socket and not the `incus` binary: one REST call costs about 1 ms on the socket
 * against 35+ ms for spawning `incus`; the API gives structured errors (status codes we map
 * to stable `IsbError` codes), ETags for safe read-modify-write, operations we can wait on
 * with a deadline and cancel, and exec streams we can drive (stdin, signals, resize) without
 * a pty in between. The CLI's output format and flags change between releases; the API is
 * versioned. It also means no `--allow-run` permission and no shell anywhere near argv.
 *
 * Layout, in the Incus Go client's style: `http.ts` does one exchange with a deadline,
 * `envelope.ts` decodes the reply (pure), `operations.ts` waits for background work, and one
 * short module per resource group holds 10–20-line functions that take an {@link IncusConn}.
 * The client object (`client.ts`) only binds them to a connection. No function takes a project:
 * `withProject(p)` returns a scoped copy. Every mutation's options require a `step`
 * ("create instance web"), so a stall or failure reads as what was being done. The remotes of
 * the `incus` client's config.yml (`remote.ts`) are exported by `rpc/base.ts`, not here: reading
 * them takes the YAML reader, which `isb rpc` has no use for before its first answer.
 *
 * @module
 */

export * from "./types.ts";
export type { Endpoint, HttpRequest, HttpResponse, TlsIdentity } from "./http.ts";
export { HttpTransport } from "./http.ts";
export type { HeaderLookup } from "./response_headers.ts";
export { WsClient, type WsTarget } from "./websocket.ts";
export { type CallOptions, DEFAULT_TIMEOUTS, IncusConn, type Timeouts } from "./conn.ts";
export {
  type AsyncReply,
  decodeEnvelope,
  type Exchange,
  isPreconditionFailed,
  type Reply,
  type SyncReply,
} from "./envelope.ts";
export { operationId, type WaitOptions } from "./operations.ts";
export type { MutationOptions } from "./_mutate.ts";
export { ISB_CODES, type IsbCode, type IsbData, IsbError } from "../errors.ts";
export { toPut } from "./instances.ts";
export type { CreateOptions, StopOptions } from "./instances.ts";
export type { FileContent, PushOptions } from "./files.ts";
export type { VolumesPost } from "./storage.ts";
export type {
  NetworkAclPut,
  NetworkAclsPost,
  NetworkPut,
  NetworksPost,
  UpdateOptions,
} from "./networks.ts";
export type { ImageAlias } from "./images.ts";
export type { CaptureOptions, ExecOptions, ExecResult, ExecSession } from "./exec.ts";
export { collect } from "./exec.ts";
export type { EventOptions, EventStream } from "./events.ts";
export * from "./client.ts";
