import assert from "node:assert/strict";
import { decodeEnvelope, isPreconditionFailed } from "./envelope.ts";
import { IsbError } from "../errors.ts";

const X = { method: "GET", path: "/1.0/instances/web" };

const OK_CASES: { name: string; status: number; body: unknown; etag?: string; want: unknown }[] = [
  {
    name: "sync with metadata",
    status: 200,
    body: { type: "sync", status_code: 200, metadata: { name: "web" } },
    want: { kind: "sync", metadata: { name: "web" } },
  },
  {
    name: "sync with an ETag",
    status: 200,
    etag: '"abc"',
    body: { type: "sync", metadata: [] },
    want: { kind: "sync", metadata: [], etag: '"abc"' },
  },
  {
    name: "sync without metadata",
    status: 200,
    body: { type: "sync" },
    want: { kind: "sync", metadata: undefined },
  },
  {
    name: "async with an operation",
    status: 202,
    body: { type: "async", operation: "/1.0/operations/1", metadata: { id: "1" } },
    want: { kind: "async", operation: "/1.0/operations/1", metadata: { id: "1" } },
  },
];

for (const c of OK_CASES) {
  Deno.test(`decodeEnvelope decodes ${c.name}`, () => {
    const got = decodeEnvelope(
      { ...X, status: c.status, etag: c.etag ?? null },
      JSON.stringify(c.body),
    );
    assert.deepEqual(got, c.want);
  });
}

const ERR_CASES: { name: string; status: number; text: string; code: string; message: string }[] = [
  {
    name: "a 404 error envelope",
    status: 404,
    text: JSON.stringify({ type: "error", error_code: 404, error: "Instance not found" }),
    code: "not_found",
    message: "incusd: GET /1.0/instances/web: Instance not found (HTTP 404)",
  },
  {
    name: "a 409 error envelope",
    status: 409,
    text: JSON.stringify({ type: "error", error_code: 409, error: "Conflict" }),
    code: "already_exists",
    message: "incusd: GET /1.0/instances/web: Conflict (HTTP 409)",
  },
  {
    name: "an error saying already exists",
    status: 400,
    text: JSON.stringify({
      type: "error",
      error_code: 400,
      error: 'Instance "web" already exists',
    }),
    code: "already_exists",
    message: 'incusd: GET /1.0/instances/web: Instance "web" already exists (HTTP 400)',
  },
  {
    name: "a 500 error envelope",
    status: 500,
    text: JSON.stringify({ type: "error", error_code: 500, error: "boom" }),
    code: "api",
    message: "incusd: GET /1.0/instances/web: boom (HTTP 500)",
  },
  {
    name: "a 412 failed precondition",
    status: 412,
    text: JSON.stringify({ type: "error", error_code: 412, error: "ETag doesn't match" }),
    code: "api",
    message: "incusd: GET /1.0/instances/web: ETag doesn't match (HTTP 412)",
  },
  {
    name: "an error type with HTTP 200",
    status: 200,
    text: JSON.stringify({ type: "error", error_code: 403, error: "not allowed" }),
    code: "api",
    message: "incusd: GET /1.0/instances/web: not allowed (HTTP 403)",
  },
  {
    name: "a plain-text 500",
    status: 500,
    text: "internal error\n",
    code: "api",
    message: "incusd: GET /1.0/instances/web: internal error (HTTP 500)",
  },
  {
    name: "garbage with HTTP 200",
    status: 200,
    text: "<html>",
    code: "protocol",
    message: 'incusd: GET /1.0/instances/web: response is not JSON (HTTP 200): "<html>"',
  },
  {
    name: "JSON without an envelope",
    status: 200,
    text: "[1,2]",
    code: "protocol",
    message: "incusd: GET /1.0/instances/web: bad response: no envelope type (HTTP 200)",
  },
  {
    name: "an unknown envelope type",
    status: 200,
    text: JSON.stringify({ type: "weird" }),
    code: "protocol",
    message:
      'incusd: GET /1.0/instances/web: bad response: unknown envelope type "weird" (HTTP 200)',
  },
  {
    name: "async without an operation",
    status: 202,
    text: JSON.stringify({ type: "async", metadata: {} }),
    code: "protocol",
    message:
      "incusd: GET /1.0/instances/web: bad response: async reply without operation (HTTP 202)",
  },
];

for (const c of ERR_CASES) {
  Deno.test(`decodeEnvelope maps ${c.name} to ${c.code}`, () => {
    assert.throws(() => decodeEnvelope({ ...X, status: c.status }, c.text), (e: unknown) => {
      assert.ok(e instanceof IsbError);
      assert.equal(e.code, c.code);
      assert.equal(e.message, c.message);
      if (c.code !== "protocol") {
        assert.deepEqual(Object.keys(e.data ?? {}).sort(), ["method", "path", "status"]);
      }
      return true;
    });
  });
}

Deno.test("isPreconditionFailed is true only for the api error of HTTP 412", () => {
  const text = JSON.stringify({ type: "error", error_code: 412, error: "x" });
  assert.throws(() => decodeEnvelope({ ...X, status: 412 }, text), isPreconditionFailed);
  const other = JSON.stringify({ type: "error", error_code: 500, error: "x" });
  assert.throws(
    () => decodeEnvelope({ ...X, status: 500 }, other),
    (e) => !isPreconditionFailed(e),
  );
});
