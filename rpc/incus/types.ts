/**
 * The shapes of the Incus REST API that this project reads and writes, and the client
 * interface every layer above programs against (the sandbox engine, the proxy's address
 * map, templates). Only the fields we use are typed; everything else passes through.
 *
 * @module
 */

/** `GET /1.0` metadata (the parts we read). */
export interface ServerInfo {
  api_extensions: string[];
  api_version: string;
  auth: string;
  environment: {
    driver: string;
    server_version: string;
    storage?: string;
    server_clustered?: boolean;
    server_name?: string;
    [k: string]: unknown;
  };
  config: Record<string, unknown>;
  [k: string]: unknown;
}

/** A device: string properties, `type` among them. */
export type Device = Record<string, string>;

/** An instance as `GET /1.0/instances/NAME` returns it. */
export interface Instance {
  name: string;
  type: "container" | "virtual-machine";
  status: string;
  status_code: number;
  architecture: string;
  config: Record<string, string>;
  devices: Record<string, Device>;
  expanded_config?: Record<string, string>;
  expanded_devices?: Record<string, Device>;
  profiles: string[];
  ephemeral: boolean;
  stateful: boolean;
  description: string;
  created_at: string;
  last_used_at?: string;
  location?: string;
  project?: string;
  [k: string]: unknown;
}

/** An instance plus the ETag that guards an update of it. */
export interface Versioned<T> {
  value: T;
  etag: string | undefined;
}

/** `GET /1.0/instances/NAME/state` (the parts we read). */
export interface InstanceState {
  status: string;
  status_code: number;
  pid: number;
  network?: Record<string, {
    addresses: { family: string; address: string; netmask: string; scope: string }[];
    hwaddr?: string;
    state?: string;
    [k: string]: unknown;
  }>;
  cpu?: { usage: number };
  memory?: { usage: number };
  [k: string]: unknown;
}

/** The source of a new instance. */
export type InstanceSource =
  | {
    type: "image";
    alias?: string;
    fingerprint?: string;
    server?: string;
    protocol?: string;
    mode?: string;
  }
  | { type: "copy"; source: string; instance_only?: boolean; project?: string }
  | { type: "none" };

/** `POST /1.0/instances` body. */
export interface InstancesPost {
  name: string;
  type?: "container" | "virtual-machine";
  source: InstanceSource;
  config?: Record<string, string>;
  devices?: Record<string, Device>;
  profiles?: string[];
  ephemeral?: boolean;
  description?: string;
  start?: boolean;
}

/** The writable part of an instance (`PUT /1.0/instances/NAME`). */
export interface InstancePut {
  architecture: string;
  config: Record<string, string>;
  devices: Record<string, Device>;
  ephemeral: boolean;
  profiles: string[];
  stateful: boolean;
  description: string;
}

/** `PUT /1.0/instances/NAME/state` body. */
export interface StatePut {
  action: "start" | "stop" | "restart" | "freeze" | "unfreeze";
  timeout?: number;
  force?: boolean;
  stateful?: boolean;
}

/** A storage pool. */
export interface StoragePool {
  name: string;
  driver: string;
  status?: string;
  config: Record<string, string>;
  used_by?: string[];
  [k: string]: unknown;
}

/** A custom storage volume. */
export interface StorageVolume {
  name: string;
  type: string;
  content_type: string;
  config: Record<string, string>;
  used_by: string[];
  description?: string;
  location?: string;
  [k: string]: unknown;
}

/** A network. */
export interface Network {
  name: string;
  type: string;
  managed: boolean;
  config: Record<string, string>;
  description: string;
  used_by?: string[];
  status?: string;
  [k: string]: unknown;
}

/** A network ACL rule. */
export interface AclRule {
  action: "allow" | "reject" | "drop" | "allow-stateless";
  state: "enabled" | "disabled" | "logged";
  protocol?: string;
  source?: string;
  destination?: string;
  source_port?: string;
  destination_port?: string;
  description?: string;
  [k: string]: unknown;
}

/** A network ACL. */
export interface NetworkAcl {
  name: string;
  description: string;
  ingress: AclRule[];
  egress: AclRule[];
  config: Record<string, string>;
  used_by?: string[];
  [k: string]: unknown;
}

/** An image (the parts we read). */
export interface Image {
  fingerprint: string;
  aliases: { name: string; description: string }[];
  properties: Record<string, string>;
  type: string;
  [k: string]: unknown;
}

/** An event from `/1.0/events`. */
export interface IncusEvent {
  type: "lifecycle" | "operation" | "logging" | string;
  timestamp: string;
  project?: string;
  location?: string;
  metadata: {
    action?: string;
    source?: string;
    context?: Record<string, unknown>;
    [k: string]: unknown;
  };
}

/** A background operation. */
export interface Operation {
  id: string;
  class: "task" | "websocket" | "token";
  description: string;
  status: string;
  status_code: number;
  resources: Record<string, string[]> | null;
  metadata: Record<string, unknown> | null;
  may_cancel: boolean;
  err: string;
  created_at?: string;
  [k: string]: unknown;
}
