/**
 * The actions a plan is made of (isb-rpc.md §6.4), their human renderings (the progress
 * lines of §9.2), and the apply report built from the applied ones (§6.2). Pure data.
 *
 * @module
 */

/** Device or config properties. */
export type Props = Record<string, string>;

/** One step of a plan, tagged by `action`. */
export type Action =
  | { action: "create_volume"; pool: string; volume: string; config: Props }
  | {
    action: "create_instance";
    image: string;
    pool: string;
    config: Props;
    devices: Record<string, Props>;
    profiles: string[];
  }
  | {
    action: "set_config";
    key: string;
    from?: string;
    to: string;
    restart: boolean;
    secret?: true;
  }
  | { action: "add_device"; device: string; props: Props }
  | { action: "replace_device"; device: string; replaces: string; from: Props; to: Props }
  | { action: "remove_device"; device: string; props: Props }
  | { action: "start_instance" }
  | { action: "add_port"; device: string; props: Props; search: number }
  | { action: "fix_owner"; path: string; owner: string }
  | { action: "note"; message: string };

/** A plan for one sandbox; `status` is null when the instance does not exist. */
export interface SandboxPlan {
  /** The sandbox (instance) the plan is for. */
  name: string;
  /** Incus's status string (`Running`, `Stopped`, …), null if the instance does not exist. */
  status: string | null;
  /** The steps that would bring the instance to its spec, in order; notes included. */
  actions: Action[];
}

/** What `sandbox.ensure` and `compose.up` report (§6.2). */
export interface ApplyReport {
  /** The sandbox (instance) that was ensured. */
  name: string;
  /** True if this call created the instance. */
  created: boolean;
  /** Every action applied, in order, notes included. */
  applied: Action[];
  /** The settled listen address of every searched port of the spec. */
  ports: Record<string, string>;
  /** Keys of applied `set_config` actions that take effect on restart. */
  restart_needed: string[];
}

/** Whether an action changes anything (every action but `note`). */
export function isChange(a: Action): boolean {
  return a.action !== "note";
}

/** Whether a plan has changes (any action other than a note). */
export function hasChanges(plan: SandboxPlan): boolean {
  return plan.actions.some(isChange);
}

/** Whether a config key only takes effect after a restart (`raw.`, `security.`, `oci.`). */
export function restartNeeded(key: string): boolean {
  return key.startsWith("raw.") || key.startsWith("security.") || key.startsWith("oci.");
}

function props(p: Props): string {
  return Object.keys(p).filter((k) => k !== "type").sort().map((k) => `${k}=${p[k]}`).join(" ");
}

/** The human rendering of an action (§6.4), as progress lines show it. */
export function renderAction(a: Action): string {
  switch (a.action) {
    case "create_volume":
      return `+ volume ${a.volume} (pool ${a.pool})`;
    case "create_instance":
      return `+ create from ${a.image} on pool ${a.pool} with ${
        Object.keys(a.devices).length
      } device(s)`;
    case "set_config":
      return `~ config ${a.key}: ${a.from ?? "(unset)"} -> ${a.to}${
        a.restart ? " (takes effect on restart)" : ""
      }`;
    case "add_device":
      return `+ device ${a.device}: ${props(a.props)}`;
    case "replace_device":
      return a.device === a.replaces
        ? `~ device ${a.device}: ${props(a.from)} -> ${props(a.to)}`
        : `~ device ${a.replaces} -> ${a.device}: ${props(a.from)} -> ${props(a.to)}`;
    case "remove_device":
      return `- device ${a.device}`;
    case "start_instance":
      return "> start";
    case "add_port":
      return `+ port ${a.device}: ${props(a.props)} (search ${a.search})`;
    case "fix_owner":
      return `~ chown ${a.owner} ${a.path}`;
    case "note":
      return `  note: ${a.message}`;
  }
}

/** Builds the apply report: `restart_needed` from applied restart-flagged `set_config`s. */
export function buildReport(
  name: string,
  opts: { created: boolean; applied: Action[]; ports?: Record<string, string> },
): ApplyReport {
  const restart: string[] = [];
  for (const a of opts.applied) {
    if (a.action === "set_config" && a.restart && !restart.includes(a.key)) restart.push(a.key);
  }
  return {
    name,
    created: opts.created,
    applied: opts.applied,
    ports: opts.ports ?? {},
    restart_needed: restart,
  };
}

/** The progress line after an apply that set restart-only keys (§9.2). */
export function restartLine(name: string, keys: string[]): string {
  return `${name}: ${keys.join(", ")} changed; takes effect after \`isb restart ${name}\``;
}
