import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync } from 'node:fs';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';

/** How to start a harness: the program (already wrapped in its sandbox) and what it is handed. */
export interface HarnessProcess {
  file: string;
  args: string[];
  env: Record<string, string>;
  /** Handed to the child from fd 3 on, and closed here once it has them. */
  fds?: number[];
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
  readonly #connection: acp.ClientConnection;
  #capabilities: acp.AgentCapabilities | undefined;
  /** While a loaded session replays its history, which no turn tells. */
  #loading = false;
  /** The harness session this process has open. */
  #open: string | undefined;
  #stderr = '';

  private constructor(spec: HarnessProcess, cwd: string) {
    const fds = spec.fds ?? [];
    // Its own process group: a kill reaches whatever the harness started too.
    this.child = spawn(spec.file, spec.args, { cwd, env: spec.env, stdio: ['pipe', 'pipe', 'pipe', ...fds], detached: true });
    for (const fd of fds) closeSync(fd);
    this.child.stderr!.on('data', (chunk: Buffer) => {
      if (this.#stderr.length < 4096) this.#stderr += chunk.toString();
    });
    this.exited = new Promise((resolve) => this.child.once('close', () => resolve()));
    const fromChild = (Readable.toWeb(this.child.stdout!) as ReadableStream<Uint8Array>).pipeThrough(withoutUsageUpdates());
    const stream = acp.ndJsonStream(Writable.toWeb(this.child.stdin!) as WritableStream<Uint8Array>, fromChild);
    this.#connection = acp
      .client({ name: 'agentd' })
      .onRequest('session/request_permission', ({ params }) => this.listener?.permission(params) ?? { outcome: { outcome: 'cancelled' } })
      .onNotification('session/update', ({ params }) => {
        if (!this.#loading) this.listener?.update(params.update);
      })
      .connect(stream);
  }

  /** Starts the harness and initializes the connection. */
  static async start(spec: HarnessProcess, cwd: string): Promise<HarnessConnection> {
    const connection = new HarnessConnection(spec, cwd);
    try {
      const init = await connection.#connection.agent.request('initialize', {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      });
      connection.#capabilities = init.agentCapabilities ?? undefined;
      return connection;
    } catch (error) {
      await connection.end();
      throw error;
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
   */
  async openSession(saved: string | undefined, cwd: string, mcpServers: acp.McpServer[]): Promise<{ sessionId: string; fresh: boolean }> {
    if (saved && saved === this.#open) return { sessionId: saved, fresh: false };
    if (saved && this.#capabilities?.loadSession) {
      this.#loading = true;
      const loaded = await this.agent.request('session/load', { sessionId: saved, cwd, mcpServers }).then(
        () => true,
        () => false,
      );
      this.#loading = false;
      if (loaded) return { sessionId: (this.#open = saved), fresh: false };
    }
    const { sessionId } = await this.agent.request('session/new', { cwd, mcpServers });
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
    }
    await this.end();
  }

  /** Ends the process and everything it started (its own process group) at once: an abort, a force, a crash. */
  async end(): Promise<void> {
    this.#connection.close();
    try {
      if (this.child.pid !== undefined) process.kill(-this.child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
    await this.exited;
  }
}

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
