/**
 * The shapes of Incus's storage, network and image objects that this project reads and
 * writes (apart from the instance and operation shapes in types.ts, which re-exports these,
 * to keep each file to one concern). Only the fields we use are typed; everything else
 * passes through.
 *
 * @module
 */

/** A storage pool. */
export interface StoragePool {
  /** Name. */
  name: string;
  /** Driver name. */
  driver: string;
  /** Status text. */
  status?: string;
  /** Configuration keys. */
  config: Record<string, string>;
  /** URLs of what uses it. */
  used_by?: string[];
  /** Fields we do not type pass through. */
  [k: string]: unknown;
}

/** A custom storage volume. */
export interface StorageVolume {
  /** Name. */
  name: string;
  /** Type. */
  type: string;
  /** `filesystem` or `block`. */
  content_type: string;
  /** Configuration keys. */
  config: Record<string, string>;
  /** URLs of what uses it. */
  used_by: string[];
  /** Free-form description. */
  description?: string;
  /** Cluster member holding it. */
  location?: string;
  /** Fields we do not type pass through. */
  [k: string]: unknown;
}

/** A network. */
export interface Network {
  /** Name. */
  name: string;
  /** Type. */
  type: string;
  /** Managed by Incus. */
  managed: boolean;
  /** Configuration keys. */
  config: Record<string, string>;
  /** Free-form description. */
  description: string;
  /** URLs of what uses it. */
  used_by?: string[];
  /** Status text. */
  status?: string;
  /** Fields we do not type pass through. */
  [k: string]: unknown;
}

/** A network ACL rule. */
export interface AclRule {
  /** What to do. */
  action: "allow" | "reject" | "drop" | "allow-stateless";
  /** Link state. */
  state: "enabled" | "disabled" | "logged";
  /** Protocol. */
  protocol?: string;
  /** Where the instance comes from. */
  source?: string;
  /** Destination addresses. */
  destination?: string;
  /** Source ports. */
  source_port?: string;
  /** Destination ports. */
  destination_port?: string;
  /** Free-form description. */
  description?: string;
  /** Fields we do not type pass through. */
  [k: string]: unknown;
}

/** A network ACL. */
export interface NetworkAcl {
  /** Name. */
  name: string;
  /** Free-form description. */
  description: string;
  /** Ingress rules. */
  ingress: AclRule[];
  /** Egress rules. */
  egress: AclRule[];
  /** Configuration keys. */
  config: Record<string, string>;
  /** URLs of what uses it. */
  used_by?: string[];
  /** Fields we do not type pass through. */
  [k: string]: unknown;
}

/** An image (the parts we read). */
export interface Image {
  /** Image fingerprint. */
  fingerprint: string;
  /** Aliases of the image. */
  aliases: { name: string; description: string }[];
  /** Image properties. */
  properties: Record<string, string>;
  /** Type. */
  type: string;
  /** Fields we do not type pass through. */
  [k: string]: unknown;
}
