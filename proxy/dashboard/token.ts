/**
 * The dashboard's secrets, derived from the proxy's shutdown token (`proxy.token`, 0600 in
 * the proxy's state directory), so nothing new is stored and every restart changes them:
 * the page token (`isx dashboard` puts it in the URL, the browser keeps it as a cookie) and
 * the task-report token (`isx mcp` presents it to `POST /tasks`). Both are one-way
 * (SHA-256 with a label): a page token that leaks through a browser's history opens the
 * read-only page, never `POST /shutdown` or `POST /tasks`.
 *
 * @module
 */

const enc = new TextEncoder();

async function derive(label: string, shutdownToken: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", enc.encode(`${label}\0${shutdownToken}`));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The page token of a proxy whose shutdown token is `shutdownToken`. */
export function dashboardToken(shutdownToken: string): Promise<string> {
  return derive("isx-dashboard", shutdownToken);
}

/** The task-report token (`POST /tasks`) of that proxy. */
export function taskReportToken(shutdownToken: string): Promise<string> {
  return derive("isx-task-report", shutdownToken);
}
