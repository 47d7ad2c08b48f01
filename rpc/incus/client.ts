/**
 * The {@link IncusClient} object: the resource functions of this folder bound to one
 * connection ({@link bindClient}), and {@link createIncusClient}, which opens the transport
 * (the local socket by default, HTTPS with a client certificate for a remote). Apart from
 * `mod.ts`, the folder's public face, so that each file holds one concern.
 *
 * @module
 */

import { type HttpResponse, HttpTransport, type TlsIdentity } from "./http.ts";
import { type CallOptions, DEFAULT_TIMEOUTS, IncusConn, type Timeouts } from "./conn.ts";
import type { AsyncReply, Reply } from "./envelope.ts";
import type { MutationOptions } from "./_mutate.ts";
import * as ops from "./operations.ts";
import * as inst from "./instances.ts";
import * as files from "./files.ts";
import * as storage from "./storage.ts";
import * as nets from "./networks.ts";
import * as images from "./images.ts";
import * as exec from "./exec.ts";
import * as events from "./events.ts";
import type {
  Image,
  Instance,
  InstancePut,
  InstancesPost,
  InstanceState,
  Network,
  NetworkAcl,
  Operation,
  ServerInfo,
  StatePut,
  StoragePool,
  StorageVolume,
  Versioned,
} from "./types.ts";

/** Options of {@link createIncusClient}. */
export interface IncusClientOptions {
  /** Unix socket path (default `/var/lib/incus/unix.socket`); ignored when `url` is set. */
  socket?: string;
  /** `https://host:port` of a remote incusd; needs `tls`. */
  url?: string;
  /** Client certificate, key and CA for `url`. */
  tls?: TlsIdentity;
  /** Project to scope calls to ("" or "default": the default project). */
  project?: string;
  /** Cluster member new instances are created on (`?target=`); incusd chooses when absent. */
  target?: string;
  /** Deadline overrides (milliseconds). */
  timeouts?: Partial<Timeouts>;
}

/** The Incus client every layer above programs against. */
export interface IncusClient {
  /** The socket path or URL, as messages show it. */
  readonly where: string;
  /** The project calls are scoped to ("" = default). */
  readonly project: string;
  /** The underlying connection, for the resource functions and tests. */
  readonly conn: IncusConn;
  /** A copy scoped to `project`, sharing the transport. */
  withProject(project: string): IncusClient;
  /** Releases the transport (shared by every scoped copy). */
  close(): void;

  /** One REST call, envelope decoded (escape hatch for endpoints without a helper). */
  call(method: string, path: string, opts?: CallOptions): Promise<Reply>;
  /** One REST call, raw response. */
  raw(method: string, path: string, opts?: CallOptions): Promise<HttpResponse>;
  /** `GET /1.0`. */
  serverInfo(): Promise<ServerInfo>;
  /** Waits for an operation (see operations.ts). */
  waitOperation(op: string | AsyncReply, opts: ops.WaitOptions): Promise<Operation>;
  /** Fetches an operation. */
  getOperation(id: string): Promise<Operation>;
  /** Cancels an operation; true when accepted. */
  cancelOperation(id: string): Promise<boolean>;

  /** Lists instances (recursion=1). */
  listInstances(): Promise<Instance[]>;
  /** Fetches an instance and its ETag. */
  getInstance(name: string): Promise<Versioned<Instance>>;
  /** Fetches an instance's runtime state. */
  getInstanceState(name: string): Promise<InstanceState>;
  /** Creates an instance from an image or a copy, and waits. */
  createInstance(req: InstancesPost, opts: inst.CreateOptions): Promise<Operation>;
  /** Replaces an instance's writable config; If-Match with `etag` (412 → isPreconditionFailed). */
  putInstance(name: string, put: InstancePut, opts: nets.UpdateOptions): Promise<void>;
  /** Read-modify-write with If-Match, 5 attempts. */
  updateInstance(
    name: string,
    mutate: (i: Instance) => InstancePut | Instance | void,
    opts: MutationOptions,
  ): Promise<void>;
  /** Any state change, waited for. */
  setInstanceState(name: string, state: StatePut, opts: MutationOptions): Promise<void>;
  /** Starts an instance. */
  startInstance(name: string, opts: MutationOptions): Promise<void>;
  /** Stops an instance (clean with `timeoutSecs`, or `force`). */
  stopInstance(name: string, opts: inst.StopOptions): Promise<void>;
  /** Stops cleanly within `timeoutSecs`, then forcibly. */
  stopInstanceOrKill(name: string, opts: inst.StopOptions): Promise<void>;
  /** Restarts an instance. */
  restartInstance(name: string, opts: inst.StopOptions): Promise<void>;
  /** Deletes a stopped instance. */
  deleteInstance(name: string, opts: MutationOptions): Promise<void>;

  /** Starts a command over websockets. */
  exec(name: string, opts: exec.ExecOptions): Promise<exec.ExecSession>;
  /** Runs a command to completion, collecting stdout/stderr. */
  execCapture(name: string, argv: string[], opts?: exec.CaptureOptions): Promise<exec.ExecResult>;

  /** Writes a file inside an instance. */
  pushFile(
    name: string,
    path: string,
    data: Uint8Array | string,
    opts: files.PushOptions,
  ): Promise<void>;
  /** Reads a file from an instance. */
  pullFile(name: string, path: string): Promise<files.FileContent>;
  /** Creates a directory inside an instance. */
  mkdir(name: string, path: string, opts: files.PushOptions): Promise<void>;
  /** Deletes a file or empty directory inside an instance. */
  deleteFile(name: string, path: string, opts: MutationOptions): Promise<void>;

  /** Lists storage pools. */
  listStoragePools(): Promise<StoragePool[]>;
  /** Fetches a storage pool. */
  getStoragePool(pool: string): Promise<StoragePool>;
  /** Lists a pool's custom volumes. */
  listVolumes(pool: string): Promise<StorageVolume[]>;
  /** Fetches a custom volume and its ETag. */
  getVolume(pool: string, name: string): Promise<Versioned<StorageVolume>>;
  /** Creates a custom volume. */
  createVolume(pool: string, req: storage.VolumesPost, opts: MutationOptions): Promise<void>;
  /** Deletes a custom volume. */
  deleteVolume(pool: string, name: string, opts: MutationOptions): Promise<void>;

  /** Lists networks. */
  listNetworks(): Promise<Network[]>;
  /** Fetches a network and its ETag. */
  getNetwork(name: string): Promise<Versioned<Network>>;
  /** Creates a network. */
  createNetwork(req: nets.NetworksPost, opts: MutationOptions & { target?: string }): Promise<void>;
  /** Replaces a network's config. */
  putNetwork(name: string, put: nets.NetworkPut, opts: nets.UpdateOptions): Promise<void>;
  /** Merges into a network's config. */
  patchNetwork(
    name: string,
    patch: Partial<nets.NetworkPut>,
    opts: nets.UpdateOptions,
  ): Promise<void>;
  /** Deletes a network. */
  deleteNetwork(name: string, opts: MutationOptions): Promise<void>;
  /** Lists network ACLs. */
  listNetworkAcls(): Promise<NetworkAcl[]>;
  /** Fetches a network ACL and its ETag. */
  getNetworkAcl(name: string): Promise<Versioned<NetworkAcl>>;
  /** Creates a network ACL. */
  createNetworkAcl(req: nets.NetworkAclsPost, opts: MutationOptions): Promise<void>;
  /** Replaces a network ACL. */
  putNetworkAcl(name: string, put: nets.NetworkAclPut, opts: nets.UpdateOptions): Promise<void>;
  /** Merges into a network ACL. */
  patchNetworkAcl(
    name: string,
    patch: Partial<nets.NetworkAclPut>,
    opts: nets.UpdateOptions,
  ): Promise<void>;
  /** Deletes a network ACL. */
  deleteNetworkAcl(name: string, opts: MutationOptions): Promise<void>;

  /** Lists local images. */
  listImages(): Promise<Image[]>;
  /** Resolves an image alias. */
  getImageAlias(name: string): Promise<images.ImageAlias>;
  /** Fetches an image by fingerprint. */
  getImage(fingerprint: string): Promise<Image>;

  /** Subscribes to `/1.0/events`. */
  events(opts?: events.EventOptions): Promise<events.EventStream>;
}

/** Creates a client for the local socket (default) or a remote HTTPS endpoint. */
export function createIncusClient(opts: IncusClientOptions = {}): IncusClient {
  if (opts.url && !opts.tls) throw new TypeError("createIncusClient: `url` needs `tls`");
  const transport = opts.url && opts.tls
    ? new HttpTransport({ url: opts.url, tls: opts.tls })
    : new HttpTransport({ socket: opts.socket ?? "/var/lib/incus/unix.socket" });
  const timeouts = { ...DEFAULT_TIMEOUTS, ...opts.timeouts };
  return bindClient(new IncusConn(transport, opts.project ?? "", timeouts, opts.target ?? ""));
}

/** Binds every resource function to `c`. */
export function bindClient(c: IncusConn): IncusClient {
  return {
    where: c.transport.where,
    project: c.project,
    conn: c,
    withProject: (p) => bindClient(c.withProject(p)),
    close: () => c.transport.close(),
    call: (m, p, o) => c.call(m, p, o),
    raw: (m, p, o) => c.raw(m, p, o),
    serverInfo: async () => (await c.sync<ServerInfo>("GET", "/1.0")).metadata,
    waitOperation: (op, o) => ops.waitOperation(c, op, o),
    getOperation: (id) => ops.getOperation(c, id),
    cancelOperation: (id) => ops.cancelOperation(c, id),
    listInstances: () => inst.listInstances(c),
    getInstance: (n) => inst.getInstance(c, n),
    getInstanceState: (n) => inst.getInstanceState(c, n),
    createInstance: (r, o) => inst.createInstance(c, r, o),
    putInstance: (n, p, o) => inst.putInstance(c, n, p, o),
    updateInstance: (n, f, o) => inst.updateInstance(c, n, f, o),
    setInstanceState: (n, s, o) => inst.setInstanceState(c, n, s, o),
    startInstance: (n, o) => inst.startInstance(c, n, o),
    stopInstance: (n, o) => inst.stopInstance(c, n, o),
    stopInstanceOrKill: (n, o) => inst.stopInstanceOrKill(c, n, o),
    restartInstance: (n, o) => inst.restartInstance(c, n, o),
    deleteInstance: (n, o) => inst.deleteInstance(c, n, o),
    exec: (n, o) => exec.execStart(c, n, o),
    execCapture: (n, a, o) => exec.execCapture(c, n, a, o),
    pushFile: (n, p, d, o) => files.pushFile(c, n, p, d, o),
    pullFile: (n, p) => files.pullFile(c, n, p),
    mkdir: (n, p, o) => files.mkdir(c, n, p, o),
    deleteFile: (n, p, o) => files.deleteFile(c, n, p, o),
    listStoragePools: () => storage.listStoragePools(c),
    getStoragePool: (p) => storage.getStoragePool(c, p),
    listVolumes: (p) => storage.listVolumes(c, p),
    getVolume: (p, n) => storage.getVolume(c, p, n),
    createVolume: (p, r, o) => storage.createVolume(c, p, r, o),
    deleteVolume: (p, n, o) => storage.deleteVolume(c, p, n, o),
    listNetworks: () => nets.listNetworks(c),
    getNetwork: (n) => nets.getNetwork(c, n),
    createNetwork: (r, o) => nets.createNetwork(c, r, o),
    putNetwork: (n, p, o) => nets.putNetwork(c, n, p, o),
    patchNetwork: (n, p, o) => nets.patchNetwork(c, n, p, o),
    deleteNetwork: (n, o) => nets.deleteNetwork(c, n, o),
    listNetworkAcls: () => nets.listNetworkAcls(c),
    getNetworkAcl: (n) => nets.getNetworkAcl(c, n),
    createNetworkAcl: (r, o) => nets.createNetworkAcl(c, r, o),
    putNetworkAcl: (n, p, o) => nets.putNetworkAcl(c, n, p, o),
    patchNetworkAcl: (n, p, o) => nets.patchNetworkAcl(c, n, p, o),
    deleteNetworkAcl: (n, o) => nets.deleteNetworkAcl(c, n, o),
    listImages: () => images.listImages(c),
    getImageAlias: (n) => images.getImageAlias(c, n),
    getImage: (f) => images.getImage(c, f),
    events: (o) => events.subscribeEvents(c, o),
  };
}
