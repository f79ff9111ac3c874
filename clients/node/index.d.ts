// Types for @sandgate/client (hand-written beside the plain JS; keep in step with lib/).

/// <reference types="node" />

export interface ConnectionOptions {
  /** host:port of the gateway (default $SANDGATE_ADDR, else 127.0.0.1:7443). */
  addr?: string;
  /** Tenant API key (default $SANDGATE_API_KEY). */
  apiKey?: string;
  /** Default end-user id (default $SANDGATE_USER). */
  userId?: string;
  /** TLS; implied by rootCertificates or clientCert (default $SANDGATE_TLS). */
  tls?: boolean;
  /** PEM roots (Buffer) or a file path (default $SANDGATE_CA_FILE; system roots). */
  rootCertificates?: Buffer | string;
  /** mTLS client certificate and key: PEM Buffers or file paths. */
  clientCert?: Buffer | string;
  clientKey?: Buffer | string;
  /** Name to verify in the gateway's certificate. */
  serverName?: string;
  /** Default deadline of unary calls, seconds (30). */
  timeout?: number;
  channelOptions?: Record<string, string | number>;
}

export declare class Client {
  constructor(options?: ConnectionOptions);
  readonly addr: string;
  readonly userId: string | undefined;
  unary(method: string, request: object, timeout?: number): Promise<any>;
  stream(method: string, request: object, timeout: number, onEvent: (event: any) => void, signal?: AbortSignal): Promise<void>;
  close(): void;
}

export interface CallOptions {
  /** Client-side deadline of the call, seconds. */
  requestTimeout?: number;
}

export interface StreamOptions extends CallOptions {
  /** Aborting cancels the call (and interrupts the code); it rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface SandboxTarget extends ConnectionOptions {
  /** A shared Client; without it one is made from the connection options and closed with the sandbox. */
  client?: Client;
}

export type EgressTarget = string | [string, number] | { host: string; port?: number };

export interface CreateOptions extends SandboxTarget, CallOptions {
  /** Template the policy allows (default 'code-interpreter'). */
  template?: string;
  taskId?: string;
  /** Lifetime in seconds (0/undefined = policy default; capped by policy). */
  ttlSeconds?: number;
  /** The sandbox's whole environment (plus granted secrets). */
  env?: Record<string, string>;
  /** Network the task needs; denied unless the policy grants it. */
  egress?: EgressTarget[];
  /** Names of credentials the task needs. */
  secrets?: string[];
  /** Signed end-user token, where the tenant requires one. */
  userToken?: string;
  /** Labels (key -> value): returned in SandboxInfo.metadata, matched by list({metadata}). */
  metadata?: Record<string, string>;
}

export interface ListOptions extends SandboxTarget, CallOptions {
  /** Only sandboxes carrying every one of these labels. */
  metadata?: Record<string, string>;
  /** 0 = 100; at most 1000. */
  pageSize?: number;
  /** nextPageToken of the previous page; '' = the first. */
  pageToken?: string;
}

export interface FileInfo {
  path: string;
  name: string;
  type: 'FILE_TYPE_FILE' | 'FILE_TYPE_DIRECTORY' | 'FILE_TYPE_SYMLINK' | 'FILE_TYPE_FIFO' |
    'FILE_TYPE_SOCKET' | 'FILE_TYPE_DEVICE' | 'FILE_TYPE_UNSPECIFIED';
  size: number;
  mode: number;
  /** Unix ms */
  mtime: number;
}

export interface FileChunk { offset: number; data: Buffer; size: number; last: boolean; }

export interface FileEvent {
  type: 'FILE_EVENT_READY' | 'FILE_EVENT_CREATE' | 'FILE_EVENT_MODIFY' | 'FILE_EVENT_DELETE' |
    'FILE_EVENT_RENAME' | 'FILE_EVENT_OVERFLOW' | 'FILE_EVENT_TYPE_UNSPECIFIED';
  path: string;
  from_path: string;
  is_dir: boolean;
  dropped: number;
}

export interface SandboxInfo {
  sandboxId: string;
  template: string;
  userId: string;
  taskId: string;
  createdAt: Date | null;
  expiresAt: Date | null;
  state: 'running' | 'terminated' | 'unspecified';
  metadata: Record<string, string>;
}

export interface SandboxList extends Array<SandboxInfo> {
  /** Hosts the gateway could not ask; their sandboxes are missing. Empty = complete. */
  unreachableHosts: string[];
  /** '' = the last page; else pass as pageToken. */
  nextPageToken: string;
}

export declare class Result {
  /** The representation older servers sent (a figure's PNG, else the text). */
  readonly mimeType: string;
  readonly data: Buffer;
  /** Every representation, by MIME type (text/plain, text/html, image/png, ...). */
  readonly representations: Record<string, Buffer>;
  /** The output cap dropped some representations; notice says which. */
  readonly dropped: boolean;
  readonly notice: string;
  readonly latex: string | null;
  readonly text: string | null;
  readonly png: Buffer | null;
  readonly jpeg: Buffer | null;
  readonly svg: string | null;
  readonly html: string | null;
  readonly markdown: string | null;
  readonly json: unknown;
  /** True for the value of the cell's final expression (text/plain). */
  readonly isMainResult: boolean;
  formats(): string[];
}

export interface ExecutionError {
  name: string;
  value: string;
  traceback: string;
}

export interface End {
  durationUs: number;
  truncated: boolean;
  outputBytesTotal: number;
  timedOut: boolean;
  contextRestarted: boolean;
  /** Results with representations dropped by the output cap. */
  resultsDropped: number;
}

export declare class Execution {
  logs: { stdout: string; stderr: string };
  results: Result[];
  /** The code's own exception (the context survives it), or null. */
  error: ExecutionError | null;
  end: End | null;
  readonly text: string | null;
  readonly truncated: boolean;
  readonly timedOut: boolean;
  readonly contextRestarted: boolean;
  readonly outputBytesTotal: number;
  readonly durationMs: number;
}

export interface RunCodeOptions extends StreamOptions {
  context?: CodeContext | string;
  /** Seconds; the server interrupts the code past it. */
  timeout?: number;
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  onResult?: (result: Result) => void;
  onError?: (error: ExecutionError) => void;
  maxOutputBytes?: number;
}

export interface CommandResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  signal: number;
  timedOut: boolean;
  truncated: boolean;
  outputBytesTotal: number;
  durationMs: number;
}

export interface CommandOptions extends StreamOptions {
  timeout?: number;
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  maxOutputBytes?: number;
}

export declare class CodeContext {
  readonly sandbox: Sandbox;
  readonly contextId: string;
  readonly id: string;
  readonly language: string;
  /** As of listCodeContexts(); '' otherwise. */
  readonly state: '' | 'starting' | 'idle' | 'running' | 'restarting';
  /** Unix ms, as of listCodeContexts(); 0 otherwise. */
  readonly createdAt: number;
  /** Times its state was lost (restarts, timeouts, crashes). */
  readonly restarts: number;
  runCode(code: string, opts?: Omit<RunCodeOptions, 'context'>): Promise<Execution>;
}

export interface ProcessOptions extends CallOptions {
  pty?: boolean;
  rows?: number;
  cols?: number;
  /** Seconds until it is killed; none = until it ends or the sandbox does. */
  timeout?: number;
  /** The newest bytes kept per stream (0 = 1 MiB, capped by policy). */
  maxOutputBytes?: number;
}

export interface ExecExit {
  exit_code: number;
  signal: number;
  timed_out: boolean;
  truncated: boolean;
  output_bytes_total: number;
  duration_us: number;
}

export interface ProcessInfo {
  process_id: string;
  command: string;
  state: 'PROCESS_STATE_UNSPECIFIED' | 'PROCESS_STATE_STARTING' | 'PROCESS_STATE_RUNNING' | 'PROCESS_STATE_EXITED';
  pty: boolean;
  pty_rows: number;
  pty_cols: number;
  started_at: number;
  ended_at: number;
  stdout_bytes: number;
  stderr_bytes: number;
  exit: ExecExit | null;
  stdin_closed: boolean;
}

export interface ProcessEvent {
  event: 'stdout' | 'stderr' | 'exit' | 'dropped';
  stdout?: { offset: number; data: Buffer };
  stderr?: { offset: number; data: Buffer };
  exit?: ExecExit;
  dropped?: { stderr: boolean; offset: number; bytes: number };
}

export declare class Process {
  readonly sandbox: Sandbox;
  readonly processId: string;
  readonly pid: string;
  readonly pty: boolean;
  info(opts?: CallOptions): Promise<ProcessInfo>;
  /** Resolves to the bytes still waiting to be read. */
  sendStdin(data: string | Buffer, opts?: CallOptions & { close?: boolean }): Promise<number>;
  closeStdin(opts?: CallOptions): Promise<number>;
  signal(sig?: number | string, opts?: CallOptions): Promise<void>;
  kill(opts?: CallOptions): Promise<void>;
  resize(rows: number, cols: number, opts?: CallOptions): Promise<void>;
  wait(timeout?: number): Promise<ProcessInfo>;
  attach(onEvent: (ev: ProcessEvent) => void, opts?: CallOptions & { stdoutOffset?: number;
    stderrOffset?: number; signal?: AbortSignal }): Promise<void>;
  output(opts?: CallOptions & { onStdout?: (b: Buffer) => void; onStderr?: (b: Buffer) => void }):
    Promise<{ stdout: Buffer; stderr: Buffer; dropped: number; exit: ExecExit | null; exitCode: number | null }>;
}

export declare class Pty {
  create(opts?: ProcessOptions & { cmd?: string }): Promise<Process>;
}

export declare class Commands {
  run(cmd: string, opts?: CommandOptions): Promise<CommandResult>;
  run(cmd: string, opts: CommandOptions & ProcessOptions & { background: true }): Promise<Process>;
  start(cmd: string, opts?: ProcessOptions): Promise<Process>;
  list(opts?: CallOptions): Promise<ProcessInfo[]>;
  connect(processId: string): Process;
  sendStdin(processId: string, data: string | Buffer, opts?: CallOptions & { close?: boolean }): Promise<number>;
  kill(processId: string, opts?: CallOptions): Promise<void>;
}

export declare class Files {
  read(path: string, opts?: CallOptions & { format?: 'text' }): Promise<string>;
  read(path: string, opts: CallOptions & { format: 'bytes' }): Promise<Buffer>;
  write(path: string, data: string | Buffer, opts?: CallOptions & { mode?: number }): Promise<number>;
  list(path?: string, opts?: CallOptions & { recursive?: boolean; maxEntries?: number }):
    Promise<{ entries: FileInfo[]; truncated: boolean }>;
  stat(path?: string, opts?: CallOptions): Promise<FileInfo>;
  exists(path: string): Promise<boolean>;
  makeDir(path: string, opts?: CallOptions & { parents?: boolean; mode?: number }): Promise<FileInfo>;
  remove(path: string, opts?: CallOptions & { recursive?: boolean }): Promise<number>;
  rename(src: string, dst: string, opts?: CallOptions & { overwrite?: boolean }): Promise<FileInfo>;
  upload(path: string, data: string | Buffer | Iterable<Buffer> | AsyncIterable<Buffer>,
    opts?: CallOptions & { offset?: number; chunkSize?: number; mode?: number; size?: number }):
    Promise<{ size: number; bytes_written: number }>;
  download(path: string, opts?: CallOptions & { offset?: number; length?: number; chunkSize?: number;
    onChunk?: (c: FileChunk) => void; signal?: AbortSignal }): Promise<Buffer>;
  watch(path: string, onEvent: (ev: FileEvent) => void,
    opts?: CallOptions & { recursive?: boolean; signal?: AbortSignal }): Promise<void>;
}

export declare class Sandbox {
  static create(opts?: CreateOptions): Promise<Sandbox>;
  static connect(sandboxId: string, opts?: SandboxTarget & CallOptions): Promise<Sandbox>;
  static list(opts?: ListOptions): Promise<SandboxList>;
  static listAll(opts?: ListOptions): Promise<SandboxList>;
  /** Create, run fn, and kill in a finally. */
  static using<T>(opts: CreateOptions, fn: (sb: Sandbox) => Promise<T> | T): Promise<T>;
  readonly client: Client;
  readonly userId: string;
  readonly sandboxId: string;
  readonly id: string;
  readonly info: SandboxInfo;
  readonly commands: Commands;
  readonly files: Files;
  readonly pty: Pty;
  getInfo(opts?: CallOptions): Promise<SandboxInfo>;
  isRunning(): Promise<boolean>;
  setTimeout(seconds: number, opts?: CallOptions): Promise<SandboxInfo>;
  /** true if this call killed it, false if it was already gone. */
  kill(opts?: CallOptions): Promise<boolean>;
  close(): void;
  createCodeContext(opts?: CallOptions & { language?: string }): Promise<CodeContext>;
  listCodeContexts(opts?: CallOptions): Promise<CodeContext[]>;
  restartCodeContext(context?: CodeContext | string, opts?: CallOptions): Promise<CodeContext>;
  removeCodeContext(context: CodeContext | string, opts?: CallOptions): Promise<void>;
  runCode(code: string, opts?: RunCodeOptions): Promise<Execution>;
}

export declare class SandgateError extends Error {
  /** gRPC status code (number) and its name. */
  readonly code: number;
  readonly codeName: string;
  readonly details: string;
  /** ErrorInfo.reason, e.g. 'POLICY_DENIED', or null. */
  readonly reason: string | null;
  /** The policy rule that decided, or null. */
  readonly rule: string | null;
  readonly domain: string | null;
  readonly metadata: Record<string, string>;
  readonly retryable: boolean;
}
export declare class Unauthenticated extends SandgateError {}
export declare class PermissionDenied extends SandgateError {}
export declare class PolicyDenied extends PermissionDenied {}
export declare class NotFound extends SandgateError {}
export declare class SandboxNotFound extends NotFound {}
export declare class SandboxLost extends SandboxNotFound {
  /** When the host lost it (RFC 3339, UTC), or null. */
  readonly lostAt: string | null;
}
export declare class QuotaExceeded extends SandgateError {}
export declare class InvalidArgument extends SandgateError {}
export declare class Timeout extends SandgateError {}
export declare class Unavailable extends SandgateError {}
export declare class HostUnavailable extends Unavailable {}
export declare class Cancelled extends SandgateError {}
export declare class AlreadyExists extends SandgateError {}
export declare class FailedPrecondition extends SandgateError {}
