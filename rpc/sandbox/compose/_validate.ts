/**
 * What a loaded compose file must satisfy beyond its schema (isb-rpc.md §12.4, §12.5): the
 * defaults filled in (project name, sandbox names, volume names), named mounts of declared
 * volumes, `depends_on` (known, not self, no cycle), secrets (one source each, declared where
 * used, octal modes, targets under /run/secrets), `user`/`working_dir` fit for unit lines, environment secrets only where a command receives them, healthcheck
 * shapes, `deploy` (replicated only; `resources.limits` folded into `cpus`/`mem_limit`) and
 * OCI command quoting; plus dependency order and service selection. Pure; errors are plain
 * messages (the loader makes them `parse` errors naming the files).
 *
 * @module
 */

import { invalid } from "../../errors.ts";
import { parseDuration } from "../../duration.ts";
import { ociCommandLine } from "../resolve/config.ts";
import { isOci, parseImage } from "../resolve/image.ts";
import type { ComposeFile, SandboxSpec, SecretDef } from "../spec/spec.ts";
import { validateSecretName } from "../spec/egress.ts";
import { secretFileMode } from "../spec/service.ts";
import { checkUnitValues } from "./_unit_values.ts";
import { sanitizeName, serviceSandboxName, volumeIncusName } from "./_names.ts";

/** Checks that a secret definition has exactly one source; a message when it does not. */
export function secretDefProblem(def: SecretDef): string | undefined {
  const sources = [def.file, def.environment, def.external, def.age, def.driver]
    .filter((s) => s !== undefined).length;
  if (sources !== 1) {
    return "needs exactly one of file, environment, external, age, or driver (with name)";
  }
  if (def.name !== undefined && !def.external && def.driver === undefined) {
    return "name goes with external or driver";
  }
  if (def.driver !== undefined && !def.name) {
    return "driver needs name: the driver's reference to the secret";
  }
  if (def.external && def.name !== undefined) {
    try {
      validateSecretName(def.name);
    } catch (e) {
      return (e as Error).message;
    }
  }
  if (def.age !== undefined && def.age.trim() === "") return "age is empty";
  if (def.refresh !== undefined) {
    if (def.driver === undefined) return "refresh goes with driver";
    let ms: number;
    try {
      ms = parseDuration(def.refresh);
    } catch (e) {
      return `refresh: ${(e as Error).message}`;
    }
    if (ms < 10_000) return `refresh ${JSON.stringify(def.refresh)}: at least 10s`;
  }
  return undefined;
}

/** A healthcheck's problem, if any (`disable` and `[NONE]` are fine). */
export function healthcheckProblem(h: NonNullable<SandboxSpec["healthcheck"]>): string | undefined {
  if (h.disable) return undefined;
  const [kind, ...rest] = h.test ?? [];
  if (kind === undefined) return "healthcheck needs a test";
  if (kind === "NONE") return undefined;
  if (kind === "CMD-SHELL" && rest.length !== 1) return "CMD-SHELL takes exactly one shell line";
  if (kind !== "CMD" && kind !== "CMD-SHELL") {
    return `healthcheck test must start with CMD, CMD-SHELL or NONE, not ${JSON.stringify(kind)} ` +
      "(a plain string is a shell line)";
  }
  if (rest.length === 0) return "healthcheck test has no command";
  for (const d of [h.interval, h.timeout, h.start_period, h.start_interval]) {
    if (d === undefined) continue;
    try {
      parseDuration(d);
    } catch (e) {
      return (e as Error).message;
    }
  }
  return undefined;
}

/** Service names with every service after its dependencies (ties in name order). Throws `invalid`. */
export function dependencyOrder(file: ComposeFile): string[] {
  const order: string[] = [];
  let remaining = Object.keys(file.services).sort();
  while (remaining.length > 0) {
    const ready = remaining.filter((s) =>
      Object.keys(file.services[s]!.depends_on ?? {}).every((d) =>
        order.includes(d) || !(d in file.services)
      )
    );
    if (ready.length === 0) throw invalid(`depends_on has a cycle among: ${remaining.join(", ")}`);
    order.push(...ready);
    remaining = remaining.filter((s) => !ready.includes(s));
  }
  return order;
}

/** Fills defaults and validates; returns the project name. Throws `invalid` with the detail. */
export function finishComposeFile(
  file: ComposeFile,
  opts: { projectName?: string | undefined; baseName: string },
): string {
  const name = sanitizeName(opts.projectName ?? file.name ?? opts.baseName);
  for (const [key, vol] of Object.entries(file.volumes ?? {})) {
    if (!vol.name) vol.name = volumeIncusName(name, key, Boolean(vol.external));
  }
  for (const [service, spec] of Object.entries(file.services)) {
    if (!spec.container_name) spec.container_name = serviceSandboxName(name, service);
    for (const m of spec.volumes ?? []) {
      if (m.type === "volume" && !(m.source in (file.volumes ?? {}))) {
        throw invalid(
          `service ${JSON.stringify(service)} mounts volume ${
            JSON.stringify(m.source)
          }, which is not ` +
            "declared under top-level volumes",
        );
      }
    }
  }
  for (const [key, def] of Object.entries(file.secrets ?? {})) {
    const p = secretDefProblem(def);
    if (p) throw invalid(`secret ${JSON.stringify(key)}: ${p}`);
    if (def.external && def.name === undefined) {
      try {
        validateSecretName(key);
      } catch (e) {
        throw invalid(`external secret: ${(e as Error).message}`);
      }
    }
  }
  for (const [service, spec] of Object.entries(file.services)) validateService(file, service, spec);
  dependencyOrder(file);
  file.name = name;
  return name;
}

function validateService(file: ComposeFile, service: string, spec: SandboxSpec): void {
  const s = JSON.stringify(service);
  checkUnitValues(service, spec);
  for (const dep of Object.keys(spec.depends_on ?? {})) {
    if (!(dep in file.services)) {
      throw invalid(`service ${s} depends on ${JSON.stringify(dep)}, which is not a service here`);
    }
    if (dep === service) throw invalid(`service ${s} depends on itself`);
  }
  for (const ref of spec.secrets ?? []) {
    if (!(ref.source in (file.secrets ?? {}))) {
      throw invalid(
        `service ${s} uses secret ${
          JSON.stringify(ref.source)
        }, which is not declared under top-level secrets`,
      );
    }
    const mode = secretFileMode(ref);
    if (typeof mode === "string") throw invalid(`service ${s}: ${mode}`);
  }
  const envSecrets = Object.entries(spec.environment ?? {}).filter(([, v]) =>
    typeof v !== "string"
  );
  for (const [k, v] of envSecrets) {
    const key = (v as { secret: string }).secret;
    if (!(key in (file.secrets ?? {}))) {
      throw invalid(
        `service ${s}: environment ${k} uses secret ${
          JSON.stringify(key)
        }, which is not declared under top-level secrets`,
      );
    }
  }
  let oci = false;
  try {
    oci = isOci(parseImage(spec.image));
  } catch {
    oci = false; // an image problem is resolve's to report
  }
  if (oci) {
    const line = [...(spec.entrypoint ?? []), ...(spec.command ?? [])];
    try {
      if (line.length > 0) ociCommandLine(line);
    } catch (e) {
      throw invalid(`service ${s}: ${(e as Error).message}`);
    }
  }
  if (envSecrets.length > 0 && !oci && spec.command === undefined) {
    throw invalid(
      `service ${s}: environment secrets on a system image need a command to give them to`,
    );
  }
  if (spec.healthcheck) {
    const p = healthcheckProblem(spec.healthcheck);
    if (p) throw invalid(`service ${s}: ${p}`);
  }
  const d = spec.deploy;
  if (d?.mode !== undefined && d.mode !== "replicated") {
    throw invalid(
      `service ${s}: deploy.mode ${JSON.stringify(d.mode)} is not supported (only replicated)`,
    );
  }
  const limits = d?.resources?.limits;
  if (limits?.cpus !== undefined) {
    if (spec.cpus !== undefined || spec.cpuset !== undefined) {
      throw invalid(`service ${s}: set cpus or deploy.resources.limits.cpus, not both`);
    }
    spec.cpus = limits.cpus.trim().replace(/\.0$/, "");
  }
  if (limits?.memory !== undefined) {
    if (spec.mem_limit !== undefined) {
      throw invalid(`service ${s}: set mem_limit or deploy.resources.limits.memory, not both`);
    }
    spec.mem_limit = limits.memory;
  }
}

/**
 * The services `up`/`plan` act on: all, or the named ones plus everything they depend on,
 * in dependency order. An unknown name is `invalid` `no service "x" in <files> (have: …)`.
 */
export function selectServices(
  file: ComposeFile,
  opts: { services?: string[]; files: string },
): string[] {
  const order = dependencyOrder(file);
  const wanted = opts.services ?? [];
  if (wanted.length === 0) return order;
  const want = new Set<string>();
  const stack = wanted.map((s) => checkService(file, s, opts.files));
  while (stack.length > 0) {
    const s = stack.pop()!;
    if (want.has(s)) continue;
    want.add(s);
    stack.push(...Object.keys(file.services[s]?.depends_on ?? {}));
  }
  return order.filter((s) => want.has(s));
}

/** Exactly the named services (all when none), validated, in dependency order (`down` reverses it). */
export function selectExact(
  file: ComposeFile,
  opts: { services?: string[]; files: string },
): string[] {
  const wanted = opts.services ?? [];
  for (const s of wanted) checkService(file, s, opts.files);
  return dependencyOrder(file).filter((s) => wanted.length === 0 || wanted.includes(s));
}

function checkService(file: ComposeFile, service: string, files: string): string {
  if (service in file.services) return service;
  throw invalid(
    `no service ${JSON.stringify(service)} in ${files} (have: ${
      Object.keys(file.services).sort().join(", ")
    })`,
  );
}
