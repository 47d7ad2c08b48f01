/**
 * The README's main job, as a client would do it: start `bin/isb rpc`, declare a sandbox,
 * run commands in it (buffered, streamed, with stdin), show its plan and report, remove it.
 * Prints the protocol lines as they go (`->` sent, `<-` received). Talks only the wire
 * protocol, so it doubles as a worked example for SDK authors. Imports nothing.
 *
 * @module
 */

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const NAME = Deno.args[0] ?? "isx-demo";
const IMAGE = Deno.env.get("ISX_DEMO_IMAGE") ?? "dev-base";

const enc = new TextEncoder();
const dec = new TextDecoder();
const b64 = (s: string) => btoa(String.fromCharCode(...enc.encode(s)));
const unb64 = (s: string) => dec.decode(Uint8Array.from(atob(s), (c) => c.charCodeAt(0)));
const short = (line: string) => (line.length > 300 ? line.slice(0, 300) + " …" : line);
const out = (s: string) => Deno.stdout.writeSync(enc.encode(s + "\n"));

const child = new Deno.Command(`${ROOT}/bin/isb`, {
  args: ["rpc"],
  stdin: "piped",
  stdout: "piped",
  stderr: "inherit",
}).spawn();
const writer = child.stdin.getWriter();
const waiting = new Map<number, (msg: Record<string, unknown>) => void>();
let nextId = 1;
let hello: (v: unknown) => void = () => {};
const helloSeen = new Promise((r) => (hello = r));

(async () => {
  let buf = "";
  for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      out(`<- ${short(line)}`);
      const msg = JSON.parse(line);
      if ("isb" in msg) hello(msg);
      if (msg.event === "stdout") out(`   (stdout: ${JSON.stringify(unb64(msg.data))})`);
      if ("result" in msg || "error" in msg) waiting.get(msg.id)?.(msg);
    }
  }
})();

async function call(method: string, params: Record<string, unknown> = {}) {
  const id = nextId++;
  const line = JSON.stringify({ id, method, params });
  out(`-> ${short(line)}`);
  const reply = new Promise<Record<string, unknown>>((r) => waiting.set(id, r));
  await writer.write(enc.encode(line + "\n"));
  const msg = await reply;
  if (msg.error) throw new Error(`${method} failed: ${JSON.stringify(msg.error)}`);
  return msg.result as Record<string, unknown>;
}

await helloSeen;
let failed = false;
try {
  await call("version");
  const spec = { container_name: NAME, image: IMAGE, labels: { demo: "isx" }, ready: ["running"] };
  await call("sandbox.remove", { name: NAME, force: true }).catch(() => undefined);
  await call("sandbox.create", { spec });
  await call("sandbox.ensure", { spec }); // unchanged: no actions
  const r = await call("sandbox.exec", { name: NAME, argv: ["uname", "-sr"] });
  out(`   uname: ${unb64(r.stdout as string).trim()}, exit ${r.exit_code}`);
  await call("sandbox.exec", {
    name: NAME,
    argv: ["sh", "-c", "for i in 1 2 3; do echo tick $i; sleep 0.2; done"],
    stream: true,
  });
  const cat = await call("sandbox.exec", {
    name: NAME,
    argv: ["sha256sum"],
    stdin: { data: b64("hello from the host\n") },
  });
  out(`   sha256 in the guest: ${unb64(cat.stdout as string).trim()}`);
  await call("sandbox.get", { name: NAME });
} catch (e) {
  failed = true;
  out(`demo failed: ${(e as Error).message}`);
} finally {
  await call("sandbox.remove", { name: NAME, force: true }).catch(() => undefined);
  await writer.close();
  const status = await child.status;
  out(`isb rpc exited with ${status.code}`);
}
Deno.exit(failed ? 1 : 0);
