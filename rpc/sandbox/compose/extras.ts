/**
 * The compose-only steps of `compose.up` (isb-rpc.md §12.6): secret values, secret files
 * under `/run/secrets`, a systemd unit supervising a long-running `command` on a system
 * image, and `service_healthy` probing.
 *
 * Secret values are read locally (a `file` relative to the compose directory, an
 * `environment` variable through the same lookup as interpolation); `external`, `age` and
 * `driver` secrets need the org store of `isb serve` and are refused. Values are pushed
 * through the Incus file API, never through a shell, and never logged.
 *
 * @module
 */

import { posix } from "node:path";
import { IsbError } from "../../errors.ts";
import { formatDuration, parseDuration } from "../../duration.ts";
import type { IncusClient } from "../../incus/mod.ts";
import type { Clock } from "../../clock.ts";
import type { ComposeFile, SandboxSpec } from "../spec/spec.ts";
import { secretFileMode } from "../spec/parts.ts";
import { ensureGuestDir } from "../instances/guest_dir.ts";
import { checkHostFile } from "../../host_paths.ts";
import { checkUnitValues, secretPath, secretTargetProblem } from "./_unit_values.ts";

/** The top-level secret keys a service uses (files and environment). */
export function usedSecretKeys(spec: SandboxSpec): string[] {
  const keys = new Set((spec.secrets ?? []).map((s) => s.source));
  for (const v of Object.values(spec.environment ?? {})) {
    if (typeof v !== "string") keys.add(v.secret);
  }
  return [...keys].sort();
}

/** Values of the secrets `services` use, by key. */
export async function gatherSecretValues(
  file: ComposeFile,
  services: readonly string[],
  opts: {
    baseDir: string;
    lookup: (k: string) => string | undefined;
    readTextFile(p: string): Promise<string>;
    /** Canonical path (a symlink into a protected path is refused too). */
    realPath?(p: string): Promise<string>;
    /** Paths no secret file may be or lie under (rpc/host_paths.ts). */
    protectedPaths?: readonly string[];
  },
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const keys = new Set(services.flatMap((s) => usedSecretKeys(file.services[s]!)));
  for (const key of [...keys].sort()) {
    const def = file.secrets?.[key];
    if (!def) {
      throw new IsbError("invalid", `secret "${key}" is not declared under top-level secrets`);
    }
    if (def.file !== undefined) {
      const path = posix.resolve(opts.baseDir, def.file);
      await checkHostFile(`secret "${key}": file`, path, {
        home: "/",
        baseDir: opts.baseDir,
        roots: opts.protectedPaths ?? [],
        ...(opts.realPath ? { realPath: opts.realPath } : {}),
      });
      try {
        out[key] = await opts.readTextFile(path);
      } catch (e) {
        throw new IsbError(
          "invalid",
          `secret "${key}": cannot read ${path}: ${(e as Error).message}`,
        );
      }
    } else if (def.environment !== undefined) {
      const v = opts.lookup(def.environment);
      if (v === undefined) {
        throw new IsbError("invalid", `secret "${key}": variable ${def.environment} is not set`);
      }
      out[key] = v;
    } else {
      const kind = def.external ? "external" : def.age !== undefined ? "age" : "driver";
      throw new IsbError(
        "invalid",
        `secret "${key}": ${kind} secrets come from the org's secret store, which isb rpc cannot read`,
      );
    }
  }
  return out;
}

/** Writes the service's secret files to `/run/secrets/<target>` (checked); true when any changed. */
export async function pushSecretFiles(
  incus: IncusClient,
  name: string,
  spec: SandboxSpec,
  values: Record<string, string>,
): Promise<boolean> {
  const refs = spec.secrets ?? [];
  if (refs.length === 0) return false;
  for (const [i, ref] of refs.entries()) { // all checked before anything is written
    const bad = secretTargetProblem(ref.target ?? ref.source);
    if (bad) {
      const t = JSON.stringify(ref.target ?? ref.source);
      throw new IsbError("invalid", `${name}: secrets[${i}].target ${t} ${bad}`);
    }
  }
  const owner = /^\d+(:\d+)?$/.test(spec.user ?? "") ? spec.user!.split(":") : ["0", "0"];
  await ensureGuestDir(incus, name, "/run/secrets");
  let changed = false;
  for (const ref of refs) {
    const path = secretPath(ref.target ?? ref.source);
    const mode = secretFileMode(ref);
    if (typeof mode === "string") throw new IsbError("invalid", `${name}: ${mode}`);
    const value = values[ref.source] ?? "";
    const have = await incus.pullFile(name, path).then(
      (f) => new TextDecoder().decode(f.data),
      () => undefined,
    );
    if (have === value) continue;
    const uid = ref.uid ?? Number(owner[0]);
    await incus.pushFile(name, path, value, {
      step: `write secret ${ref.source} to ${name}`,
      uid,
      gid: ref.gid ?? Number(owner[1] ?? owner[0]),
      mode,
    });
    changed = true;
  }
  return changed;
}

/** The unit name of a supervised service. */
export function unitName(service: string): string {
  return `isb-${service}.service`;
}

function systemdQuote(s: string): string {
  return `"${
    s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/%/g, "%%").replace(/\$/g, "$$$$")
  }"`;
}

/** The unit text for a service's command. */
export function unitText(service: string, spec: SandboxSpec): string {
  checkUnitValues(service, spec);
  const argv = spec.command ?? [];
  const login = spec.exec?.login === true;
  const line = login
    ? ["/bin/sh", "-l", "-c", 'exec "$@"', "isb", ...argv]
    : argv[0]?.startsWith("/")
    ? argv
    : ["/bin/sh", "-c", 'exec "$@"', "isb", ...argv];
  const lines = [
    "[Unit]",
    `Description=isb service ${service}`,
    "After=network.target",
    "",
    "[Service]",
    `Restart=${spec.restart === "on-failure" ? "on-failure" : "always"}`,
    "RestartSec=5",
    `EnvironmentFile=/etc/isb/${service}.env`,
  ];
  if (spec.user) lines.push(`User=${spec.user.split(":")[0]}`);
  if (spec.user?.includes(":")) lines.push(`Group=${spec.user.split(":")[1]}`);
  if (spec.working_dir) lines.push(`WorkingDirectory=${spec.working_dir.replace(/%/g, "%%")}`);
  lines.push(
    `ExecStart=${line.map(systemdQuote).join(" ")}`,
    "",
    "[Install]",
    "WantedBy=multi-user.target",
    "",
  );
  return lines.join("\n");
}

/** The unit's environment file: exec env (secret variables included), one quoted line each. */
export function envFileText(env: Record<string, string>): string {
  return Object.keys(env).sort()
    .map((k) =>
      `${k}="${env[k]!.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"\n`
    )
    .join("");
}

async function systemctl(incus: IncusClient, name: string, args: string[]): Promise<void> {
  const r = await incus.execCapture(name, ["systemctl", ...args], { timeoutMs: 60_000 });
  if (r.exitCode !== 0) {
    const why = new TextDecoder().decode(r.stderr).trim() || `exit ${r.exitCode}`;
    throw new IsbError(
      "invalid",
      `${name}: systemctl ${args.join(" ")} failed (the image needs systemd): ${why}`,
    );
  }
}

/**
 * Waits until the guest's systemd answers on its bus (it does not for the first few hundred
 * ms after a start: "Failed to connect to bus"), then until boot finished, within 60 s; at
 * once when the guest has no systemctl. Secret files wait for it too: a file written before
 * systemd mounts its tmpfs on /run would be hidden by that mount.
 */
export async function waitSystemd(incus: IncusClient, name: string, clock: Clock): Promise<void> {
  const started = clock.now();
  while (true) {
    const r = await incus.execCapture(name, ["systemctl", "is-system-running", "--wait"], {
      timeoutMs: 60_000,
    });
    const err = new TextDecoder().decode(r.stderr);
    if (!err.includes("Failed to connect to bus") || clock.now() - started >= 60_000) return;
    await clock.sleep(250);
  }
}

/** Installs (or updates) the unit; restarts it only when the unit or its env changed. */
export async function installUnit(
  incus: IncusClient,
  name: string,
  opts: { service: string; spec: SandboxSpec; env: Record<string, string>; clock: Clock },
): Promise<boolean> {
  const unitPath = `/etc/systemd/system/${unitName(opts.service)}`;
  const envPath = `/etc/isb/${opts.service}.env`;
  const unit = unitText(opts.service, opts.spec);
  const env = envFileText(opts.env);
  const read = (p: string) =>
    incus.pullFile(name, p).then((f) => new TextDecoder().decode(f.data), () => undefined);
  const [haveUnit, haveEnv] = [await read(unitPath), await read(envPath)];
  if (haveUnit === unit && haveEnv === env) return false;
  await ensureGuestDir(incus, name, "/etc/isb");
  await incus.pushFile(name, envPath, env, {
    step: `write ${envPath} in ${name}`,
    uid: 0,
    gid: 0,
    mode: 0o600,
  });
  await incus.pushFile(name, unitPath, unit, {
    step: `write ${unitPath} in ${name}`,
    uid: 0,
    gid: 0,
    mode: 0o644,
  });
  await waitSystemd(incus, name, opts.clock);
  await systemctl(incus, name, ["daemon-reload"]);
  await systemctl(incus, name, ["enable", unitName(opts.service)]);
  await systemctl(incus, name, ["restart", unitName(opts.service)]);
  return true;
}

/** The probe argv of a healthcheck; undefined when disabled or `NONE`. */
export function healthProbe(spec: SandboxSpec): string[] | undefined {
  const h = spec.healthcheck;
  if (!h || h.disable) return undefined;
  const [kind, ...rest] = h.test ?? [];
  if (kind === "CMD") return rest;
  if (kind === "CMD-SHELL") return ["/bin/sh", "-c", rest[0] ?? ""];
  return undefined;
}

/** Probes until healthy within max(60 s, start_period + interval × retries). */
export async function waitHealthy(
  incus: IncusClient,
  name: string,
  opts: {
    service: string;
    spec: SandboxSpec;
    clock: Clock;
    progress?: ((l: string) => void) | undefined;
  },
): Promise<void> {
  const probe = healthProbe(opts.spec);
  if (!probe) return;
  const h = opts.spec.healthcheck!;
  const ms = (d: string | undefined, dflt: number) => (d === undefined ? dflt : parseDuration(d));
  const interval = ms(h.interval, 30_000);
  const timeout = ms(h.timeout, 30_000);
  const deadline = Math.max(60_000, ms(h.start_period, 0) + interval * Number(h.retries ?? 3));
  const pause = Math.min(ms(h.start_interval, 5000), interval);
  const started = opts.clock.now();
  opts.progress?.(`${name}: waiting for ${opts.service} to be healthy`);
  while (true) {
    let detail: string;
    try {
      const r = await incus.execCapture(name, probe, { timeoutMs: timeout });
      if (r.exitCode === 0) {
        opts.progress?.(`${name}: healthy`);
        return;
      }
      const d = new TextDecoder();
      detail = (d.decode(r.stdout) + d.decode(r.stderr)).trim() || `exit ${r.exitCode}`;
    } catch (e) {
      detail = e instanceof Error ? e.message : String(e);
    }
    const waited = opts.clock.now() - started;
    if (waited >= deadline) {
      throw new IsbError(
        "not_ready",
        `sandbox ${name} not ready after ${formatDuration(waited)}: healthcheck (${detail})`,
        {
          data: { sandbox: name, check: "healthcheck", detail, waited_secs: waited / 1000 },
        },
      );
    }
    await opts.clock.sleep(pause);
  }
}
