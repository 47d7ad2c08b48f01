/**
 * Where a sandbox's image comes from (isb-rpc.md §7 `image`): a local alias or fingerprint,
 * a simplestreams remote (`images:`, `ubuntu:`, `ubuntu-daily:`, `ubuntu-minimal:`), an OCI
 * registry (`docker:`, `ghcr:`, `quay:`, `oci:HOST/PATH[:TAG]`) or the org registry
 * (`registry:`); and the local-image lookup plan uses to refuse a missing one (§5.2).
 *
 * @module
 */

import { invalid, type IsbError } from "../../errors.ts";
import type { Image } from "../../incus/types.ts";

/** A parsed image spec. `server`/`protocol` are null for a local image. */
export interface ImageSource {
  /** The spec string as written. */
  spec: string;
  /** The remote image server's URL. */
  server: string | null;
  /** The remote's protocol (`simplestreams`, `oci`, …). */
  protocol: string | null;
  /** The alias or fingerprint on that server (or locally). */
  alias: string;
  /** A `registry:` image, not bound to an org's registry yet. */
  local_registry?: true;
}

/** The remote suggested when a local image is missing. */
export const REMOTE_DEFAULT = "images:ubuntu/24.04";

const SIMPLESTREAMS: Record<string, string> = {
  images: "https://images.linuxcontainers.org",
  ubuntu: "https://cloud-images.ubuntu.com/releases",
  "ubuntu-daily": "https://cloud-images.ubuntu.com/daily",
  "ubuntu-minimal": "https://cloud-images.ubuntu.com/minimal/releases",
};

const OCI: Record<string, string> = {
  docker: "https://docker.io",
  ghcr: "https://ghcr.io",
  quay: "https://quay.io",
};

/** `nginx` → `library/nginx:latest` on Docker Hub; a tag `:latest` added when missing. */
function ociReference(r: string, dockerHub: boolean): string {
  if (r === "" || /\s/.test(r)) throw invalid(`invalid OCI image reference ${JSON.stringify(r)}`);
  let out = dockerHub && !r.includes("/") ? `library/${r}` : r;
  const last = out.slice(out.lastIndexOf("/") + 1);
  if (!last.includes(":") && !last.includes("@")) out += ":latest";
  return out;
}

function isLoopbackHost(hostport: string): boolean {
  let host = hostport;
  if (host.startsWith("[")) {
    host = host.slice(1, host.indexOf("]") < 0 ? undefined : host.indexOf("]"));
  } else if (host.includes(":")) host = host.slice(0, host.lastIndexOf(":"));
  host = host.toLowerCase();
  return host === "localhost" || host.endsWith(".localhost") || host === "0.0.0.0" ||
    host === "::" || host === "::1" || /^127\.[0-9]+\.[0-9]+\.[0-9]+$/.test(host);
}

/** Parses an image spec (split at the first `:`). Throws `invalid` ("image is required", …). */
export function parseImage(s: string): ImageSource {
  if (s === "") throw invalid("image is required");
  const colon = s.indexOf(":");
  if (colon < 0) return { spec: s, server: null, protocol: null, alias: s };
  const remote = s.slice(0, colon);
  const alias = s.slice(colon + 1);
  const oci = OCI[remote];
  if (oci) {
    return {
      spec: s,
      server: oci,
      protocol: "oci",
      alias: ociReference(alias, remote === "docker"),
    };
  }
  if (remote === "registry") {
    if (!/^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?$/.test(alias)) {
      throw invalid(`${JSON.stringify(s)}: a registry: image is registry:APP[:TAG][@sha256:…]`);
    }
    return { spec: s, server: null, protocol: "oci", alias, local_registry: true };
  }
  if (remote === "oci") {
    const slash = alias.indexOf("/");
    if (slash < 0) throw invalid(`${JSON.stringify(s)}: an oci: image is oci:REGISTRY/PATH[:TAG]`);
    const host = alias.slice(0, slash);
    if (isLoopbackHost(host)) {
      throw invalid(
        `${
          JSON.stringify(s)
        }: a loopback registry is the local one; name its images as registry:APP:TAG`,
      );
    }
    return {
      spec: s,
      server: `https://${host}`,
      protocol: "oci",
      alias: ociReference(alias.slice(slash + 1), false),
    };
  }
  const server = SIMPLESTREAMS[remote];
  if (!server) {
    throw invalid(
      `unknown image remote ${JSON.stringify(remote)} in ${JSON.stringify(s)} (known: images, ` +
        "ubuntu, ubuntu-daily, ubuntu-minimal, and OCI registries docker, ghcr, quay, " +
        "oci:REGISTRY/...; local images need no prefix)",
    );
  }
  return { spec: s, server, protocol: "simplestreams", alias };
}

/** Whether the image is an OCI application image (its process is the instance's init). */
export function isOci(image: ImageSource): boolean {
  return image.protocol === "oci";
}

/** The local image an alias or fingerprint (prefix of ≥ 12 hex) names, if any. */
export function findLocalImage(images: readonly Image[], alias: string): Image | undefined {
  const byAlias = images.find((i) => i.aliases.some((a) => a.name === alias));
  if (byAlias) return byAlias;
  if (/^[0-9a-f]{12,64}$/.test(alias)) {
    const hits = images.filter((i) => i.fingerprint.startsWith(alias));
    if (hits.length === 1) return hits[0];
  }
  return undefined;
}

/** The `invalid` error for a local image that is not there, listing the ones that are. */
export function missingLocalImage(alias: string, images: readonly Image[]): IsbError {
  const shown = 12;
  const names = images.flatMap((i) => i.aliases.map((a) => a.name)).sort();
  const more = names.length - shown;
  const list = names.length === 0
    ? "this host has no local images"
    : `local images: ${names.slice(0, shown).join(", ")}${more > 0 ? ` and ${more} more` : ""}`;
  return invalid(
    `image ${JSON.stringify(alias)} not found locally (${list}); name a remote image with its ` +
      `server instead, e.g. ${REMOTE_DEFAULT}`,
  );
}

/**
 * The `source` of `POST /1.0/instances`: pull from the remote, or the resolved local image
 * by fingerprint (by alias when the fingerprint is not known).
 */
export function imageSourceBody(image: ImageSource, localFingerprint?: string): {
  type: "image";
  mode?: string;
  server?: string;
  protocol?: string;
  alias?: string;
  fingerprint?: string;
} {
  if (image.server !== null) {
    return {
      type: "image",
      mode: "pull",
      server: image.server,
      protocol: image.protocol ?? "simplestreams",
      alias: image.alias,
    };
  }
  return localFingerprint !== undefined
    ? { type: "image", fingerprint: localFingerprint }
    : { type: "image", alias: image.alias };
}
