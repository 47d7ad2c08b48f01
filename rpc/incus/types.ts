/**
 * The shapes of the Incus REST API that this project reads and writes, and the client
 * interface every layer above programs against (the sandbox engine, the proxy's address
 * map, templates). Only the fields we use are typed; everything else passes through.
 *
 * @module
 */

export type * from "./resource_types.ts";

/** `GET /1.0` metadata (the parts we read). */
export interface ServerInfo {
  /** Supported API extensions. */
  api_extensions: string[];
  /** API version, e.g. `1.0`. */
  api_version: string;
  /** `trusted` or `untrusted`. */
  auth: string;
  /** Server environment facts. */
  environment: {
    /** Driver name. */
    driver: string;
    /** incusd version. */
    server_version: string;
    /** Storage drivers in use. */
    storage?: string;
    /** True in a cluster. */
    server_clustered?: boolean;
    /** This member's name. */
    server_name?: string;
    /** Fields we do not type pass through. */
    [k: string]: unknown;
  };
  /** Configuration keys. */
  config: Record<string, unknown>;
  /** Fields we do not type pass through. */
  [k: string]: unknown;
}

/** A device: string properties, `type` among them. */
export type Device = Record<string, string>;

/** An instance as `GET /1.0/instances/NAME` returns it. */
export interface Instance {
  /** Name. */
  name: string;
  /** `container` or `virtual-machine`. */
  type: "container" | "virtual-machine";
  /** Status text, e.g. `Running`. */
  status: string;
  /** Numeric status. */
  status_code: number;
  /** Architecture, e.g. `x86_64`. */
  architecture: string;
  /** Configuration keys. */
  config: Record<string, string>;
  /** Devices by name. */
  devices: Record<string, Device>;
  /** Config with profiles applied. */
  expanded_config?: Record<string, string>;
  /** Devices with profiles applied. */
  expanded_devices?: Record<string, Device>;
  /** Applied profiles, in order. */
  profiles: string[];
  /** Deleted when stopped. */
  ephemeral: boolean;
  /** Stateful snapshots/stop. */
  stateful: boolean;
  /** Free-form description. */
  description: string;
  /** Creation time (RFC 3339). */
  created_at: string;
  /** Last start time (RFC 3339). */
  last_used_at?: string;
  /** Cluster member holding it. */
  location?: string;
  /** Project name. */
  project?: string;
  /** Fields we do not type pass through. */
  [k: string]: unknown;
}

/** An instance plus the ETag that guards an update of it. */
export interface Versioned<T> {
  /** The value read. */
  value: T;
  /** The `ETag` header, if incusd sent one. */
  etag: string | undefined;
}

/** `GET /1.0/instances/NAME/state` (the parts we read). */
export interface InstanceState {
  /** Status text, e.g. `Running`. */
  status: string;
  /** Numeric status. */
  status_code: number;
  /** Init PID (0 when stopped). */
  pid: number;
  /** Network interfaces by name. */
  network?: Record<string, {
    /** Addresses of the interface. */
    addresses: { family: string; address: string; netmask: string; scope: string }[];
    /** MAC address. */
    hwaddr?: string;
    /** Link state. */
    state?: string;
    /** Fields we do not type pass through. */
    [k: string]: unknown;
  }>;
  /** CPU usage. */
  cpu?: { usage: number };
  /** Memory usage. */
  memory?: { usage: number };
  /** Fields we do not type pass through. */
  [k: string]: unknown;
}

/** The source of a new instance. */
export type InstanceSource =
  | {
    /** Type. */
    type: "image";
    /** Image alias. */
    alias?: string;
    /** Image fingerprint. */
    fingerprint?: string;
    /** Remote image server URL. */
    server?: string;
    /** Protocol. */
    protocol?: string;
    /** Permission bits. */
    mode?: string;
  }
  | { type: "copy"; source: string; instance_only?: boolean; project?: string }
  | { type: "none" };

/** `POST /1.0/instances` body. */
export interface InstancesPost {
  /** Name. */
  name: string;
  /** Type. */
  type?: "container" | "virtual-machine";
  /** Where the instance comes from. */
  source: InstanceSource;
  /** Configuration keys. */
  config?: Record<string, string>;
  /** Devices by name. */
  devices?: Record<string, Device>;
  /** Applied profiles, in order. */
  profiles?: string[];
  /** Deleted when stopped. */
  ephemeral?: boolean;
  /** Free-form description. */
  description?: string;
  /** Start once created. */
  start?: boolean;
}

/** The writable part of an instance (`PUT /1.0/instances/NAME`). */
export interface InstancePut {
  /** Architecture, e.g. `x86_64`. */
  architecture: string;
  /** Configuration keys. */
  config: Record<string, string>;
  /** Devices by name. */
  devices: Record<string, Device>;
  /** Deleted when stopped. */
  ephemeral: boolean;
  /** Applied profiles, in order. */
  profiles: string[];
  /** Stateful snapshots/stop. */
  stateful: boolean;
  /** Free-form description. */
  description: string;
}

/** `PUT /1.0/instances/NAME/state` body. */
export interface StatePut {
  /** What to do. */
  action: "start" | "stop" | "restart" | "freeze" | "unfreeze";
  /** Seconds to wait (stop). */
  timeout?: number;
  /** Kill instead of a clean stop. */
  force?: boolean;
  /** Stateful snapshots/stop. */
  stateful?: boolean;
}

/** An event from `/1.0/events`. */
export interface IncusEvent {
  /** Type. */
  type: "lifecycle" | "operation" | "logging" | string;
  /** When it happened (RFC 3339). */
  timestamp: string;
  /** Project name. */
  project?: string;
  /** Cluster member holding it. */
  location?: string;
  /** The envelope's `metadata`. */
  metadata: {
    /** What to do. */
    action?: string;
    /** Where the instance comes from. */
    source?: string;
    /** Details of the event. */
    context?: Record<string, unknown>;
    /** Fields we do not type pass through. */
    [k: string]: unknown;
  };
}

/** A background operation. */
export interface Operation {
  /** Operation id. */
  id: string;
  /** `task`, `websocket` or `token`. */
  class: "task" | "websocket" | "token";
  /** Free-form description. */
  description: string;
  /** Status text, e.g. `Running`. */
  status: string;
  /** Numeric status. */
  status_code: number;
  /** Affected resources by kind. */
  resources: Record<string, string[]> | null;
  /** The envelope's `metadata`. */
  metadata: Record<string, unknown> | null;
  /** Whether DELETE may cancel it. */
  may_cancel: boolean;
  /** Error text of a failure. */
  err: string;
  /** Creation time (RFC 3339). */
  created_at?: string;
  /** Fields we do not type pass through. */
  [k: string]: unknown;
}
