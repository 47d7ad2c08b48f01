import assert from "node:assert/strict";
import { parseImage } from "./image.ts";

const IMAGES = [
  {
    in: "images:debian/12",
    out: {
      server: "https://images.linuxcontainers.org",
      protocol: "simplestreams",
      alias: "debian/12",
    },
  },
  {
    in: "ubuntu:24.04",
    out: {
      server: "https://cloud-images.ubuntu.com/releases",
      protocol: "simplestreams",
      alias: "24.04",
    },
  },
  {
    in: "ubuntu-daily:noble",
    out: {
      server: "https://cloud-images.ubuntu.com/daily",
      protocol: "simplestreams",
      alias: "noble",
    },
  },
  {
    in: "ubuntu-minimal:24.04",
    out: {
      server: "https://cloud-images.ubuntu.com/minimal/releases",
      protocol: "simplestreams",
      alias: "24.04",
    },
  },
  {
    in: "docker:nginx:1.27",
    out: { server: "https://docker.io", protocol: "oci", alias: "library/nginx:1.27" },
  },
  {
    in: "ghcr:org/app",
    out: { server: "https://ghcr.io", protocol: "oci", alias: "org/app:latest" },
  },
  {
    in: "quay:org/app@sha256:abc",
    out: { server: "https://quay.io", protocol: "oci", alias: "org/app@sha256:abc" },
  },
  {
    in: "oci:registry.example.com/team/app:2",
    out: { server: "https://registry.example.com", protocol: "oci", alias: "team/app:2" },
  },
  { in: "0a20d81b790f", out: { server: null, protocol: null, alias: "0a20d81b790f" } },
];

for (const c of IMAGES) {
  Deno.test(`parseImage reads ${c.in}`, () => {
    assert.deepStrictEqual(parseImage(c.in), { spec: c.in, ...c.out });
  });
}
