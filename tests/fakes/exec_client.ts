/**
 * A fake of the three client calls an exec makes (`exec`, `execCapture`, `pullFile`), for
 * what the fake incusd cannot do: exec websockets. Each `exec` returns a {@link FakeSession}
 * whose output, exit and stdin the test drives or inspects; a `program` decides how the
 * "command" behaves (default: `cat`, echoing stdin to stdout and exiting 0 at EOF).
 * `getent` and `/etc/passwd`/`/etc/group` answer from small tables.
 *
 * @module
 */

import { IsbError } from "../../rpc/errors.ts";
import type {
  CaptureOptions,
  ExecOptions,
  ExecResult,
  ExecSession,
  FileContent,
} from "../../rpc/incus/mod.ts";

/** A command's behaviour once started. */
export type FakeProgram = (s: FakeSession) => void | Promise<void>;

/** One started command: its output is fed by the test (or its program). */
export class FakeSession implements ExecSession {
  readonly operation = crypto.randomUUID();
  readonly options: ExecOptions;
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  readonly exit: Promise<number>;
  /** What was written to stdin, chunk by chunk. */
  readonly stdin: Uint8Array[] = [];
  /** True once stdin got EOF. */
  stdinClosed = false;
  readonly signals: number[] = [];
  readonly resizes: [number, number][] = [];
  closed = false;
  #out!: ReadableStreamDefaultController<Uint8Array>;
  #err!: ReadableStreamDefaultController<Uint8Array>;
  #exit!: (code: number) => void;
  #ended = false;
  #eof: (() => void)[] = [];

  constructor(options: ExecOptions) {
    this.options = options;
    this.stdout = new ReadableStream({ start: (c) => void (this.#out = c) });
    this.stderr = new ReadableStream({ start: (c) => void (this.#err = c) });
    this.exit = new Promise((r) => (this.#exit = r));
  }

  /** Emits on stdout. */
  out(data: string | Uint8Array): void {
    if (!this.#ended) this.#out.enqueue(bytes(data));
  }

  /** Emits on stderr. */
  err(data: string | Uint8Array): void {
    if (!this.#ended) this.#err.enqueue(bytes(data));
  }

  /** Ends both streams and resolves the exit code. */
  end(code: number): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#out.close();
    this.#err.close();
    this.#exit(code);
  }

  /** Resolves once stdin got EOF. */
  stdinEof(): Promise<void> {
    const eot = this.options.interactive && this.stdin.some((c) => c.includes(4));
    return this.stdinClosed || eot ? Promise.resolve() : new Promise((r) => this.#eof.push(r));
  }

  /** All stdin bytes as text. */
  stdinText(): string {
    return this.stdin.map((c) => new TextDecoder().decode(c)).join("");
  }

  write(data: Uint8Array): Promise<void> {
    if (this.stdinClosed || this.#ended) return Promise.reject(new IsbError("websocket", "gone"));
    this.stdin.push(data.slice());
    // A terminal ends input with ^D; the fake's programs see that as EOF.
    if (this.options.interactive && data.includes(4)) { for (const r of this.#eof.splice(0)) r(); }
    return Promise.resolve();
  }

  closeStdin(): Promise<void> {
    this.stdinClosed = true;
    for (const r of this.#eof.splice(0)) r();
    return Promise.resolve();
  }

  signal(signal: number): Promise<void> {
    this.signals.push(signal);
    if (signal === 9 || signal === 15) this.end(128 + signal);
    return Promise.resolve();
  }

  resize(width: number, height: number): Promise<void> {
    this.resizes.push([width, height]);
    return Promise.resolve();
  }

  close(): void {
    this.closed = true;
    this.end(-1);
  }
}

function bytes(data: string | Uint8Array): Uint8Array {
  return typeof data === "string" ? new TextEncoder().encode(data) : data;
}

/** `cat`: echoes stdin at EOF, exits 0. */
export const CAT: FakeProgram = async (s) => {
  await s.stdinEof();
  for (const c of s.stdin) s.out(c);
  s.end(0);
};

/** The fake client. */
export class FakeExecClient {
  /** Every started command. */
  readonly sessions: FakeSession[] = [];
  /** Every `execCapture` argv. */
  readonly captures: string[][] = [];
  /** The guest's `/etc/passwd` (undefined: the file is missing). */
  passwd: string | undefined = "root:x:0:0:root:/root:/bin/bash\n" +
    "dev:x:1000:1000:Dev:/home/dev:/bin/bash\nsvc:x:999:999::/srv:/usr/sbin/nologin\n";
  /** The guest's `/etc/group`. */
  group: string | undefined = "root:x:0:\ndev:x:1000:\nstaff:x:50:dev\n";
  /** Whether `getent` exists in the guest. */
  getent = true;
  /** Thrown by every call (an unreachable daemon). */
  failure: IsbError | undefined;
  /** Started commands wait for this before their program runs. */
  gate: Promise<void> = Promise.resolve();
  /** How commands behave. */
  program: FakeProgram = CAT;

  exec(_name: string, opts: ExecOptions): Promise<ExecSession> {
    if (this.failure) return Promise.reject(this.failure);
    const s = new FakeSession(opts);
    this.sessions.push(s);
    return this.gate.then(() => {
      void Promise.resolve(this.program(s)).catch(() => s.end(-1));
      return s;
    });
  }

  execCapture(_name: string, argv: string[], _opts?: CaptureOptions): Promise<ExecResult> {
    if (this.failure) return Promise.reject(this.failure);
    this.captures.push(argv);
    const none = { exitCode: 2, stdout: new Uint8Array(), stderr: new Uint8Array() };
    if (!this.getent || argv[0] !== "getent") return Promise.resolve({ ...none, exitCode: 127 });
    const table = argv[1] === "passwd" ? this.passwd : this.group;
    const line = (table ?? "").split("\n").find((l) => l.split(":")[0] === argv[2]);
    if (!line) return Promise.resolve(none);
    return Promise.resolve({ ...none, exitCode: 0, stdout: bytes(line + "\n") });
  }

  pullFile(name: string, path: string): Promise<FileContent> {
    if (this.failure) return Promise.reject(this.failure);
    const text = path === "/etc/passwd" ? this.passwd : path === "/etc/group" ? this.group : "";
    if (text === undefined) {
      return Promise.reject(new IsbError("not_found", `incusd: GET ${name}${path}: Not Found`));
    }
    return Promise.resolve({ data: bytes(text), uid: 0, gid: 0, mode: 0o644, type: "file" });
  }
}
