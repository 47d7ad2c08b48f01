/**
 * What one template's build does, as an ordered list of steps (pure: the executor in
 * `build.ts` runs them). Every template of a chain re-applies the guest contract that may
 * have changed since its parent was built (the proxy CA, proxy settings, placeholders, the
 * chain's merged environment and agent notes); a root template also creates `agentuser`
 * with passwordless sudo. Values from definitions reach scripts through environment
 * variables (`ISX_PARAM_*`, `ISX_REPO_*`), never by splicing them into script text.
 *
 * @module
 */

import type { ResolvedFile } from "./load.ts";
import type { Chain, ChainLink } from "./resolve.ts";
import { scripts } from "./names.ts";

/** The unprivileged user agents run as. */
export const AGENT_USER = "agentuser";
/** Where guests find the proxy CA. */
export const GUEST_CA_PATH = "/usr/local/share/ca-certificates/isx-proxy.crt";
/** Where the per-start instance secret lives in a guest. */
export const GUEST_SECRET_PATH = "/run/isx/instance-secret";
/** Placeholder credentials every guest gets instead of real ones. */
export const PLACEHOLDERS: Readonly<Record<string, string>> = {
  ANTHROPIC_API_KEY: "sk-ant-placeholder",
  OPENAI_API_KEY: "sk-placeholder",
  GH_TOKEN: "gho_placeholder",
  GITHUB_TOKEN: "gho_placeholder",
};
/** Base packages of every root template. */
export const BASE_PACKAGES = ["sudo", "ca-certificates", "curl", "bash", "less", "procps"];

/** One build step. */
export type Step =
  | { kind: "apt"; label: string; packages: string[] }
  | {
    kind: "script";
    label: string;
    script: string;
    user: "root" | "agentuser";
    env: Record<string, string>;
  }
  | { kind: "file"; label: string; file: ResolvedFile }
  | { kind: "npm"; label: string; pkg: string; version: string; install: boolean }
  | { kind: "program"; label: string };

/** The host facts a build writes into guests. */
export interface GuestFacts {
  /** The proxy CA certificate (PEM). Never its key. */
  caPem: string;
  /** The bridge gateway address, e.g. 10.77.0.1. */
  gateway: string;
  /** Domains the proxy intercepts (reached directly, so in NO_PROXY). */
  domains: readonly string[];
  /** The proxy's forward-proxy port (default 3128). */
  proxyPort?: number;
}

/** The environment every guest login gets: proxy settings, CA, placeholders. */
export function guestEnv(facts: GuestFacts): Record<string, string> {
  const proxy = `http://${facts.gateway}:${facts.proxyPort ?? 3128}`;
  const domains = facts.domains.map((d) => d.replace(/^\*\./, "."));
  const noProxy = [...new Set(["localhost", "127.0.0.1", "::1", ...domains])].join(",");
  return {
    HTTPS_PROXY: proxy,
    HTTP_PROXY: proxy,
    https_proxy: proxy,
    http_proxy: proxy,
    NO_PROXY: noProxy,
    no_proxy: noProxy,
    NODE_EXTRA_CA_CERTS: GUEST_CA_PATH,
    ISX_INSTANCE_SECRET_FILE: GUEST_SECRET_PATH,
    ...PLACEHOLDERS,
  };
}

function shQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** `/etc/profile.d/isx.sh`: one `export` per variable, single-quoted. */
export function profileText(env: Record<string, string>): string {
  const lines = Object.entries(env).map(([k, v]) => `export ${k}=${shQuote(v)}`);
  return `# written by isx build; rebuilt with every template\n${lines.join("\n")}\n`;
}

/** `/etc/environment` (pam_env): the variables whose values need no escaping. */
export function environmentText(env: Record<string, string>): string {
  const lines = Object.entries(env).filter(([, v]) => !/["\\$\n`]/.test(v))
    .map(([k, v]) => `${k}="${v}"`);
  return lines.join("\n") + "\n";
}

const ROOT_SETUP = `
if ! id ${AGENT_USER} >/dev/null 2>&1; then
  if getent passwd 1000 >/dev/null; then useradd -m -s /bin/bash ${AGENT_USER}
  else useradd -m -u 1000 -U -s /bin/bash ${AGENT_USER}; fi
fi
printf '%s ALL=(ALL) NOPASSWD:ALL\\n' ${AGENT_USER} > /etc/sudoers.d/${AGENT_USER}
chmod 0440 /etc/sudoers.d/${AGENT_USER}
install -d -m 0755 /etc/isx /etc/claude-code
`;

const TRUST_CA = `update-ca-certificates >/dev/null 2>&1 || update-ca-certificates`;

const REPO = `
if [ -d "$ISX_REPO_PATH/.git" ]; then git -C "$ISX_REPO_PATH" fetch --all --prune
else
  mkdir -p "$(dirname "$ISX_REPO_PATH")"
  if [ -n "$ISX_REPO_BRANCH" ]; then git clone --branch "$ISX_REPO_BRANCH" -- "$ISX_REPO_URL" "$ISX_REPO_PATH"
  else git clone -- "$ISX_REPO_URL" "$ISX_REPO_PATH"; fi
fi
`;

const FINISH = `
install -d -o ${AGENT_USER} -g ${AGENT_USER} "$ISX_WORKDIR"
apt-get clean
rm -rf /tmp/isx-build
# every copy must boot with its own machine id (DHCP client ids derive from it)
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id
`;

/** The workdir of a chain's leaf: its own, an ancestor's, the first repo's path, or home. */
export function workdirOf(chain: Chain): string {
  for (const l of [...chain].reverse()) {
    if (l.template.def.workdir) return l.template.def.workdir;
    const repo = l.template.def.repos?.[0];
    if (repo) return repo.path;
  }
  return `/home/${AGENT_USER}`;
}

/**
 * The chain's `accounts:` merged (a child's namespace wins), keyed as the proxy stamps
 * them: `claude` for `anthropic`, `openai` for `codex`.
 */
export function accountsOf(chain: Chain): Record<string, string> {
  const canonical: Record<string, string> = { anthropic: "claude", codex: "openai" };
  const out: Record<string, string> = {};
  for (const l of chain) {
    for (const [ns, name] of Object.entries(l.template.def.accounts ?? {})) {
      if (name !== undefined) out[canonical[ns] ?? ns] = name;
    }
  }
  return out;
}

/** The chain's merged environment (guest contract, then tools' and templates' `env`). */
export function chainEnv(chain: Chain, facts: GuestFacts): Record<string, string> {
  const env = guestEnv(facts);
  for (const l of chain) {
    for (const u of l.tools) {
      for (const [k, v] of Object.entries(u.tool.def.env ?? {})) env[k] = String(v);
    }
    for (const [k, v] of Object.entries(l.template.def.env ?? {})) env[k] = String(v);
  }
  return env;
}

/** The chain's agent notes, root first (tools' notes after their template's). */
export function chainNotes(chain: Chain): string {
  const notes: string[] = [];
  for (const l of chain) {
    if (l.template.def.agent_note) notes.push(l.template.def.agent_note.trim());
    for (const u of l.tools) if (u.tool.def.agent_note) notes.push(u.tool.def.agent_note.trim());
  }
  return notes.join("\n\n");
}

function paramEnv(params: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(params)) env[`ISX_PARAM_${k.toUpperCase()}`] = v;
  return env;
}

function text(path: string, body: string, mode = 0o644): ResolvedFile {
  return { path, data: new TextEncoder().encode(body), mode, owner: "root" };
}

/** The steps of the last link of `chain` (its parents are already built). */
export function planBuild(chain: Chain, facts: GuestFacts): Step[] {
  const link: ChainLink = chain[chain.length - 1]!;
  const def = link.template.def;
  const root = chain.length === 1;
  const steps: Step[] = [];
  const packages = [
    ...(root ? BASE_PACKAGES : []),
    ...(def.packages ?? []),
    ...link.tools.flatMap((u) => u.tool.def.packages ?? []),
  ];
  if (def.repos?.length) packages.push("git");
  const uniq = [...new Set(packages)];
  if (uniq.length) {
    steps.push({ kind: "apt", label: `apt packages: ${uniq.join(" ")}`, packages: uniq });
  }
  if (root) {
    steps.push({
      kind: "script",
      label: `create ${AGENT_USER}`,
      script: ROOT_SETUP,
      user: "root",
      env: {},
    });
  }
  steps.push({ kind: "file", label: "proxy CA", file: text(GUEST_CA_PATH, facts.caPem) });
  steps.push({
    kind: "script",
    label: "trust the proxy CA",
    script: TRUST_CA,
    user: "root",
    env: {},
  });
  for (const u of link.tools) {
    const name = u.tool.def.name;
    for (const n of u.tool.def.npm ?? []) {
      steps.push({
        kind: "npm",
        label: `${name}: npm ${n.package}@${n.version ?? "latest"}`,
        pkg: n.package,
        version: n.version ?? "latest",
        install: n.install ?? false,
      });
    }
    if (u.tool.def.program) steps.push({ kind: "program", label: `${name}: deliver isx` });
    for (const f of u.tool.files) {
      steps.push({ kind: "file", label: `${name}: file ${f.path}`, file: f });
    }
    const env = paramEnv(u.params);
    scripts(u.tool.def.run).forEach((s, i) =>
      steps.push({ kind: "script", label: `${name}: run #${i + 1}`, script: s, user: "root", env })
    );
    scripts(u.tool.def.run_as_user).forEach((s, i) =>
      steps.push({
        kind: "script",
        label: `${name}: run_as_user #${i + 1}`,
        script: s,
        user: "agentuser",
        env,
      })
    );
  }
  for (const f of link.template.files) {
    steps.push({ kind: "file", label: `file ${f.path}`, file: f });
  }
  for (const r of def.repos ?? []) {
    steps.push({
      kind: "script",
      label: `repo ${r.url} → ${r.path}`,
      script: REPO,
      user: "agentuser",
      env: { ISX_REPO_URL: r.url, ISX_REPO_PATH: r.path, ISX_REPO_BRANCH: r.branch ?? "" },
    });
  }
  scripts(def.run).forEach((s, i) =>
    steps.push({ kind: "script", label: `run #${i + 1}`, script: s, user: "root", env: {} })
  );
  scripts(def.run_as_user).forEach((s, i) =>
    steps.push({
      kind: "script",
      label: `run_as_user #${i + 1}`,
      script: s,
      user: "agentuser",
      env: {},
    })
  );
  const env = chainEnv(chain, facts);
  steps.push({
    kind: "file",
    label: "environment",
    file: text("/etc/profile.d/isx.sh", profileText(env)),
  });
  steps.push({
    kind: "file",
    label: "/etc/environment",
    file: text("/etc/environment", environmentText(env)),
  });
  const notes = chainNotes(chain);
  steps.push({
    kind: "file",
    label: "agent notes",
    file: text("/etc/isx/AGENTS.md", notes + "\n"),
  });
  steps.push({
    kind: "file",
    label: "Claude Code notes",
    file: text("/etc/claude-code/CLAUDE.md", notes + "\n"),
  });
  steps.push({
    kind: "script",
    label: "finish",
    script: FINISH,
    user: "root",
    env: { ISX_WORKDIR: workdirOf(chain) },
  });
  return steps;
}
