/**
 * Names a compose project gives things (isb-rpc.md §12.4): the sanitised project name, each
 * service's sandbox name and each named volume's incus name. Pure.
 *
 * @module
 */

/**
 * Lowercase, runs outside `[a-z0-9]` → `-`, trimmed, prefixed `isb-` unless it starts with a
 * letter (empty → `isb`): `"Demo App"` → `demo-app`, `"123"` → `isb-123`.
 */
export function sanitizeName(s: string): string {
  const out = s.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "");
  return /^[a-z]/.test(out) ? out : `isb-${out}`.replace(/-+$/, "");
}

/** A service's default sandbox name: `<project>-<sanitized service>` (`Worker_1` → `demo-worker-1`). */
export function serviceSandboxName(project: string, service: string): string {
  return `${project}-${sanitizeName(service)}`;
}

/** A named volume's default incus name: `<project>_<key>`, or the key when external. */
export function volumeIncusName(project: string, key: string, external: boolean): string {
  return external ? key : `${project}_${key}`;
}
