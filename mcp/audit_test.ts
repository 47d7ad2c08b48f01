import assert from "node:assert/strict";
import { auditLine, scrub } from "./audit.ts";

const CASES: [string, string][] = [
  ["key sk-ant-api03-AbCdEf_123-xyz in text", "key [redacted] in text"],
  ["Authorization: Bearer abc.def-ghi", "Authorization: [redacted]"],
  ["token=ghp_0123456789abcdefghijABCDEFGHIJ", "token=[redacted]"],
  ['{"api_key": "sk-proj-0123456789abcdefghij"}', '{"api_key": "[redacted]"}'],
  ["line one\nline two\r\tend", "line one line two end"],
];

Deno.test("scrub removes credential-looking values and flattens control characters", () => {
  for (const [input, want] of CASES) {
    const got = scrub(input);
    assert.equal(got, want, input);
    assert.doesNotMatch(got, /sk-ant|ghp_|sk-proj|abc\.def/);
  }
  assert.equal(scrub("x".repeat(600)).length, 500);
});

Deno.test("auditLine is one line with the spec's fields; a forged newline stays on it", () => {
  const line = auditLine({
    session: "1-2",
    tool: "exec",
    instance: "mcp-x\nsession=forged",
    outcome: "exit=0",
    ms: 12.4,
    detail: "printed sk-ant-api03-SECRET\nfake line",
  }, new Date(0));
  assert.equal(line.split("\n").length, 1);
  assert.match(
    line,
    /session=1-2 tool=exec instance=mcp-x session=forged outcome=exit=0 ms=12 detail=printed \[redacted\] fake line$/,
  );
  assert.doesNotMatch(line, /SECRET/);
});
