import type { ChildProcess } from 'node:child_process';
import { closeSync } from 'node:fs';
import { Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import { killGroup, spawnGuarded } from '../agent/tools/spawn-guarded.ts';
import { webReadable } from '../web-readable.ts';
import type { ModelCalls } from './model-calls.ts';

/** How to start a harness: the program (already wrapped in its sandbox) and what it is handed. */
export interface HarnessProcess {
  file: string;
  args: string[];
  env: Record<string, string>;
  /** Handed to the child from fd 3 on, and closed here once it has them. */
  fds?: number[];
  /** Its MCP servers, as it reaches them: given to every session it opens. */
  mcpServers: acp.McpServer[];
  /** What its start opened that must end with it (its relay). */
  release?: () => void;
  /** Its model calls, as its relay saw them. */
  modelCalls?: ModelCalls;
  /** How long after a session is closed the harness may still be writing it (Claude writes its transcript every 100 ms). */
  writeBehindMs?: number;
}

/** Who the connection's requests and updates are for: the turn that runs on it now. */
export interface ConnectionListener {
  permission(params: acp.RequestPermissionRequest): Promise<acp.RequestPermissionResponse>;
  update(update: acp.SessionNotification['update']): void;
}

/**
 * A harness process and its ACP connection, initialized. It outlives one turn: between turns of
 * its session it may wait, parked, for the next (see parked.ts), which then skips the start.
 */
export class HarnessConnection {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  listener: ConnectionListener | undefined;
  readonly modelCalls: ModelCalls | undefined;
  readonly #connection: acp.ClientConnection;
  #capabilities: acp.AgentCapabilities | undefined;
  /** While a loaded session replays its history, which no turn tells: the text it replays. */
  #replay: string[] | undefined;
  /** The harness session this process has open. */
  #open: string | undefined;
  readonly #mcpServers: acp.McpServer[];
  readonly #writeBehindMs: number;
  #stderr = '';

  private constructor(spec: HarnessProcess, cwd: string) {
    const fds = spec.fds ?? [];
    // Its own process group, which a killed server takes with it: a kill reaches whatever the harness started too.
    this.child = spawnGuarded(spec.file, spec.args, { cwd, env: spec.env, stdin: 'pipe', fds });
    for (const fd of fds) closeSync(fd);
    // Its last words are what tell why it failed: the end is kept, however much came before.
    this.child.stderr!.on('data', (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString()).slice(-STDERR_KEPT);
    });
    this.exited = new Promise((resolve) => this.child.once('close', () => resolve()));
    this.#mcpServers = spec.mcpServers;
    this.modelCalls = spec.modelCalls;
    this.#writeBehindMs = spec.writeBehindMs ?? 0;
    void this.exited.then(() => spec.release?.());
    const fromChild = webReadable(this.child.stdout!).pipeThrough(withoutUsageUpdates());
    const stream = acp.ndJsonStream(Writable.toWeb(this.child.stdin!) as WritableStream<Uint8Array>, fromChild);
    this.#connection = acp
      .client({ name: 'agentd' })
      .onRequest('session/request_permission', ({ params }) => this.listener?.permission(params) ?? { outcome: { outcome: 'cancelled' } })
      .onNotification('session/update', ({ params }) => {
        const update = params.update;
        if (!this.#replay) this.listener?.update(update);
        else if (update.sessionUpdate === 'agent_message_chunk' && update.content.type === 'text') this.#replay.push(update.content.text);
      })
      .connect(stream);
  }

  /**
   * Starts the harness and initializes the connection. A turn stopped meanwhile (its time up, a
   * stop, a force, its client gone) ends the process: a harness that never answers would otherwise
   * hold the turn, its lease and its seat for good; one that has not answered in `initializeMs`
   * (a harness answers in under 2 s) is taken as stuck, and said so then, not at the turn's time
   * limit. A harness that fails here is ended, and the error says the last it wrote to stderr.
   */
  static async start(spec: HarnessProcess, cwd: string, signal: AbortSignal, initializeMs = INITIALIZE_TIMEOUT_MS): Promise<HarnessConnection> {
    if (signal.aborted) {
      spec.release?.();
      throw signal.reason;
    }
    const connection = new HarnessConnection(spec, cwd);
    const stop = () => void connection.end();
    signal.addEventListener('abort', stop, { once: true });
    let stuck = false;
    const deadline = setTimeout(() => {
      stuck = true;
      stop();
    }, initializeMs);
    try {
      const init = await connection.#connection.agent.request('initialize', {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      });
      connection.#capabilities = init.agentCapabilities ?? undefined;
      return connection;
    } catch (error) {
      await connection.end();
      signal.throwIfAborted();
      const tail = connection.stderrTail;
      const why = stuck ? `it did not answer ACP initialize within ${initializeMs / 1000} s` : error instanceof Error ? error.message : String(error);
      throw tail || stuck ? new Error(`${why}${tail ? ` (${tail})` : ''}`, { cause: error }) : error;
    } finally {
      clearTimeout(deadline);
      signal.removeEventListener('abort', stop);
    }
  }

  get agent(): acp.ClientContext {
    return this.#connection.agent;
  }

  /** The last of what the harness wrote to stderr, for an error that needs it. */
  get stderrTail(): string | undefined {
    return this.#stderr.trim().split('\n').at(-1);
  }

  /**
   * Opens the harness session `saved` names: the one this process still has open (a parked
   * process, for its session's next turn), else loaded from the state folder, else a new one when
   * there is none or the harness lost it (its state cut off mid-write). Says which, for the prompt.
   *
   * `lastWords`, the text the session's last turn ended with, must be in what a loaded session
   * replays. A harness may write its session a moment after its turn (Claude writes its transcript
   * every 100 ms), so a process elsewhere, parked with the session open, may not have written the
   * end yet: the load is tried again a little later, and a session still short of it is not used.
   */
  async openSession(saved: string | undefined, cwd: string, lastWords?: string, meta?: Record<string, unknown>): Promise<{ sessionId: string; fresh: boolean }> {
    const mcpServers = this.#mcpServers;
    const _meta = meta ? { _meta: meta } : {};
    if (saved && saved === this.#open) return { sessionId: saved, fresh: false };
    for (let attempt = 0; saved && this.#capabilities?.loadSession && attempt < LOAD_ATTEMPTS; attempt++) {
      if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, RELOAD_WAIT_MS));
      this.#replay = [];
      const loaded = await this.agent.request('session/load', { sessionId: saved, cwd, mcpServers, ..._meta }).then(
        () => true,
        () => false,
      );
      const replayed = this.#replay.join('');
      this.#replay = undefined;
      if (!loaded) break;
      if (lastWords === undefined || replayed.includes(lastWords.trim())) return { sessionId: (this.#open = saved), fresh: false };
      await this.agent.request('session/close', { sessionId: saved }).catch(() => undefined);
    }
    const { sessionId } = await this.agent.request('session/new', { cwd, mcpServers, ..._meta });
    return { sessionId: (this.#open = sessionId), fresh: true };
  }

  /**
   * Ends the process once it is done with, closing its open session first where the harness can:
   * closing has it write the session down, so the next turn (in any process) loads all of it.
   * The close is bounded: a harness that does not answer is ended all the same.
   */
  async retire(): Promise<void> {
    const sessionId = this.#open;
    if (sessionId !== undefined && this.#capabilities?.sessionCapabilities?.close && this.child.exitCode === null && this.child.signalCode === null) {
      const request = this.agent.request('session/close', { sessionId }).catch(() => undefined);
      await Promise.race([request, this.exited, new Promise((resolve) => setTimeout(resolve, CLOSE_WAIT_MS).unref())]);
      if (this.#writeBehindMs > 0) await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, this.#writeBehindMs).unref())]);
    }
    await this.end();
  }

  /** Ends the process and everything it started (its own process group) at once: an abort, a force, a crash. */
  async end(): Promise<void> {
    this.#connection.close();
    killGroup(this.child);
    await this.exited;
  }
}

/** How long a new harness process has to answer `initialize`: its start measured 0.1–1.6 s on two cores. */
const INITIALIZE_TIMEOUT_MS = 60_000;

/** How much of what the harness writes to stderr is kept, from the end. */
const STDERR_KEPT = 4096;

/** How often a loaded session short of its last turn is loaded again, and how long apart. */
const LOAD_ATTEMPTS = 4;
const RELOAD_WAIT_MS = 150;

/** How long a harness is given to write its session down before it is ended. */
const CLOSE_WAIT_MS = 2_000;

/**
 * Drops the harness's `usage_update` notifications before the SDK reads them. Claude's carry
 * `used: null`, which the SDK's schema refuses with an error printed on every turn; the turn's
 * usage comes with the prompt's response instead.
 */
function withoutUsageUpdates(): TransformStream<Uint8Array, Uint8Array> {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let partial = '';
  const keep = (line: string) => !line.includes('"sessionUpdate":"usage_update"');
  return new TransformStream({
    transform(chunk, controller) {
      const lines = (partial + decoder.decode(chunk, { stream: true })).split('\n');
      partial = lines.pop()!;
      const kept = lines.filter(keep);
      if (kept.length) controller.enqueue(encoder.encode(`${kept.join('\n')}\n`));
    },
    flush(controller) {
      if (partial && keep(partial)) controller.enqueue(encoder.encode(partial));
    },
  });
}
