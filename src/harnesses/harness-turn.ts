import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import type { LookupFunction } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { doneEvent, type AgentEvent, type PendingInteraction, type StopReason } from '../contract/events.ts';
import type * as acp from '@agentclientprotocol/sdk';
import type { Message } from '../contract/messages.ts';
import type { McpServer } from '../contract/template.ts';
import { AppError } from '../errors.ts';
import { collectCalls, type HistoryCall } from '../agent/history.ts';
import type { ModelEndpoint } from '../agent/model.ts';
import { gateFor } from '../agent/permissions.ts';
import type { RunnableTemplate } from '../agent/template.ts';
import type { TurnInput } from '../agent/turn.ts';
import { secretList } from '../telemetry/redact.ts';
import { BWRAP, bwrapEnv, harnessInvocation, sandboxAvailable, SANDBOX_PATH } from '../agent/tools/sandbox.ts';
import { resolveModule } from './resolve-module.ts';
import { canonical } from './canonical.ts';
import type { AcpTurnEnd, GateAnswer } from './acp-turn.ts';
import type { Gated } from './update-teller.ts';
import type { HarnessProcess } from './harness-connection.ts';
import { gatingOf, type Harness, type HarnessSetup } from './harness.ts';
import { HarnessRelay, RELAY_DIR } from './relay.ts';
import { removeOwnFile, writeOwnFile } from './own-files.ts';
import { scrubState } from './scrub-state.ts';
import { claude } from './claude.ts';
import { codex } from './codex.ts';
import { pi } from './pi.ts';

/** The harnesses agentd drives, by `harness.kind`. */
export const HARNESSES = { claude, codex, pi } as const;
export type HarnessKind = keyof typeof HARNESSES;

/** ACP tool kinds that only look: `allow_reads` lets them run. */
const READ_KINDS = new Set(['read', 'search', 'fetch', 'think']);

/** What a harness turn takes: what the built-in loop's turn takes, less its model and tools, and where the harness keeps its state. */
export interface HarnessTurnInput extends Pick<TurnInput, 'turnId' | 'sessionId' | 'traceId' | 'template' | 'history' | 'workdir' | 'pricing' | 'signal' | 'newInteractionId' | 'secretValues'> {
  /** The template's MCP servers, the request's secrets filled in: the harness connects to them itself. */
  mcps: McpServer[];
  /** Resolves the MCP servers' host names for the relay, refusing what AGENTD_MCP_ALLOWED_HOSTS does (src/agent/mcp-address.ts). */
  mcpLookup?: LookupFunction | undefined;
  /** Resolves a project connection's base URL for the relay, refusing what AGENTD_CONNECTION_ALLOWED_HOSTS does (src/agent/connection-address.ts). */
  modelLookup?: LookupFunction | undefined;
  /** What the session's last finished turn ended with, if text: a harness session loaded for this turn must have it. */
  lastWords?: string;
  /** The harness's own state for the session (its sessions, settings), outside the session folder. */
  stateDir: string;
  endpoint: ModelEndpoint;
  /** Run the harness on the host when bubblewrap is missing (AGENTD_UNSAFE_HOST_BASH). */
  unsafeHost: boolean;
  /** How long its model may send nothing (AGENTD_MODEL_TIMEOUT_MS), which its relay enforces. */
  modelTimeoutMs: number;
  parking: { ttlMs: number; max: number };
}

/** The harness's program, or a 424 saying how to install it. */
export function harnessEntry(harness: Harness): string {
  try {
    for (const module of harness.program.requires ?? []) resolveModule(module);
    return resolveModule(harness.program.module);
  } catch {
    throw new AppError(
      'harness-unavailable',
      `harness "${harness.kind}" is not installed on this server: install it with "npm install ${harness.package}" in agentd's folder (it is an optional dependency)`,
    );
  }
}

/**
 * The gate of every call the harness asks about. A decision the caller recorded on the paused call
 * answers the call the harness raises again for the same tool and input, once; a denial is never
 * lost and an approval never reaches another call. Otherwise the mode and the tool's own
 * permission decide, as for the built-in agent.
 */
function gatekeeper(harness: Harness, template: RunnableTemplate, decided: HistoryCall[]): { gate: (call: Gated) => GateAnswer; decisionsLeft: () => number } {
  const open = [...decided];
  const gate = (call: Gated): GateAnswer => {
    const at = open.findIndex((d) => d.toolName === call.toolName && canonical(d.input) === canonical(call.input));
    if (at >= 0) {
      const [decision] = open.splice(at, 1);
      return { approved: decision!.approval!.approved === true, answers: decision!.toolCallId };
    }
    const entry = template.tools.find((t) => t.type === 'builtin' && harness.toolNames[t.name] === call.toolName);
    const mode = gateFor(entry, template.runner.permissions.default, READ_KINDS.has(call.kind ?? ''));
    return mode === 'ask' ? 'pause' : { approved: mode === 'allow' };
  };
  return { gate, decisionsLeft: () => open.length };
}

/**
 * What the harness is told: the new user message, or, on a turn that answers a pause, to go on. A
 * first turn of a conversation the harness never saw carries the conversation so far.
 */
function promptOf(history: Message[], continues: boolean, fresh: boolean): string {
  const last = history.at(-1);
  const ask = continues ? 'Continue.' : last?.role === 'user' ? last.content : '';
  if (!fresh) return ask;
  const earlier = (continues ? history : history.slice(0, -1)).filter((m) => (m.role === 'user' || m.role === 'assistant') && m.content && m.tool_name === undefined);
  if (earlier.length === 0) return ask;
  const transcript = earlier.map((m) => `${m.role}: ${m.content}`).join('\n');
  return `The conversation so far:\n${transcript}\n\nuser: ${ask}`;
}

/** How the harness's process reaches its model and MCP servers, and what else of the network. */
export interface HarnessReach {
  /** The template's HTTP and SSE MCP servers (the request's secrets filled in), and its stdio ones. */
  mcps: readonly McpServer[];
  /** How the relay resolves the MCP servers' host names (HarnessTurnInput.mcpLookup). */
  mcpLookup?: LookupFunction | undefined;
  /** How the relay resolves the model's host name (HarnessTurnInput.modelLookup). */
  modelLookup?: LookupFunction | undefined;
  /** `sandbox.permissions.network`: off, the harness reaches nothing but the relay. */
  network: 'on' | 'off';
  /** Run it on the host when bubblewrap is missing (AGENTD_UNSAFE_HOST_BASH). */
  unsafeHost: boolean;
  /** How long its model may send nothing (AGENTD_MODEL_TIMEOUT_MS). */
  modelTimeoutMs: number;
  /** The run's secrets and keys: masked in what the model and the MCP servers answer the harness. */
  secrets: ReadonlyArray<string | undefined>;
}

/**
 * Starts what a harness process needs and says how to start it: the relay to its model and MCP
 * servers (relay.ts), its settings files in the state folder (told the relay's URL and token, not
 * the key), and its program under bubblewrap (or, where the operator opted in, on the host).
 */
export async function harnessProcess(harness: Harness, setup: HarnessSetup, reach: HarnessReach): Promise<HarnessProcess> {
  const entry = harnessEntry(harness);
  const sandboxed = await sandboxAvailable();
  if (!sandboxed && !reach.unsafeHost) {
    throw new AppError(
      'harness-unavailable',
      `harness "${harness.kind}" runs under bubblewrap, which this server lacks: install it ("apt-get install bubblewrap"), or set AGENTD_UNSAFE_HOST_BASH=1 to run harnesses unsandboxed`,
    );
  }
  const remote = reach.mcps.flatMap((m) => (m.connection.type === 'stdio' ? [] : [m.connection]));
  const upstreams = [{ url: setup.endpoint.baseUrl, headers: modelAuth(setup.endpoint), lookup: reach.modelLookup }, ...remote.map((c) => ({ url: c.url, headers: c.headers ?? {}, lookup: reach.mcpLookup }))];
  // Without bubblewrap nothing can take the network away: the relay listens where the host's loopback reaches it.
  const relay = await HarnessRelay.open(upstreams, sandboxed ? reach.network : 'on', reach.modelTimeoutMs, [...reach.secrets, setup.endpoint.apiKey]);
  let lockedDir: string | undefined;
  try {
    const relayed: HarnessSetup = { ...setup, endpoint: { ...setup.endpoint, baseUrl: relay.urls[0]!, apiKey: relay.token } };
    await mkdir(setup.stateDir, { recursive: true });
    for (const file of harness.settings(relayed)) {
      if (file.content === undefined) await removeOwnFile(setup.stateDir, file.path);
      else await writeOwnFile(setup.stateDir, file.path, file.content);
    }
    // Outside the session and state folders (both writable inside), read-only inside.
    const locked = harness.lockedSettings?.(relayed);
    lockedDir = locked ? await mkdtemp(path.join(os.tmpdir(), 'agentd-locked-')) : undefined;
    if (locked && lockedDir) await writeFile(path.join(lockedDir, 'settings.json'), locked.content, { mode: 0o444 });
    const lockedFiles = locked && lockedDir ? [{ from: path.join(lockedDir, 'settings.json'), to: locked.at }] : [];
    const command = await commandFor(harness, entry, relayed, relay, reach.network, lockedFiles);
    const dropLocked = () => void (lockedDir && rm(lockedDir, { recursive: true, force: true }));
    return {
      ...command,
      mcpServers: acpServers(reach.mcps, relay),
      release: () => (relay.close(), dropLocked()),
      modelCalls: relay.modelCalls,
      ...(harness.writeBehindMs ? { writeBehindMs: harness.writeBehindMs } : {}),
    };
  } catch (error) {
    if (lockedDir) await rm(lockedDir, { recursive: true, force: true });
    relay.close();
    throw error;
  }
}

/** The credentials the model's API takes, put on each request by the relay. */
function modelAuth(endpoint: ModelEndpoint): Record<string, string> {
  if (!endpoint.apiKey) return {};
  return endpoint.provider === 'anthropic' ? { 'x-api-key': endpoint.apiKey } : { authorization: `Bearer ${endpoint.apiKey}` };
}

/** Runs inside the sandbox when the network is off, in front of the harness (relay-launcher.mjs). */
const LAUNCHER = fileURLToPath(new URL('./relay-launcher.mjs', import.meta.url));

async function commandFor(harness: Harness, entry: string, setup: HarnessSetup, relay: HarnessRelay, network: 'on' | 'off', lockedFiles: Array<{ from: string; to: string }>): Promise<Omit<HarnessProcess, 'mcpServers'>> {
  const harnessProgram = harness.program.native ? [entry] : [process.execPath, entry];
  const nodeDir = path.dirname(process.execPath);
  const env = { PATH: `${nodeDir}:${SANDBOX_PATH}`, LANG: 'C.UTF-8', TMPDIR: '/tmp', ...harness.env(setup) };
  // Read-only: Node's own folder and the node_modules the harness package lives in.
  const modules = entry.slice(0, entry.lastIndexOf(`${path.sep}node_modules${path.sep}`) + `${path.sep}node_modules`.length);
  const readOnly = [path.dirname(nodeDir), modules];
  const socketDir = relay.socketDir;
  const program = socketDir ? [process.execPath, LAUNCHER, RELAY_DIR, relay.ports.join(','), ...harnessProgram] : harnessProgram;
  const mounted = socketDir ? [{ from: socketDir, to: RELAY_DIR }] : [];
  const sandboxed = await harnessInvocation({ folder: setup.folder, stateDir: setup.stateDir, readOnly: socketDir ? [...readOnly, LAUNCHER] : readOnly, lockedFiles, mounted, network, env });
  if (sandboxed) return { file: BWRAP, args: [...sandboxed.args, ...program], env: bwrapEnv(), fds: sandboxed.fds };
  return { file: program[0]!, args: program.slice(1), env };
}

/** MCP servers as ACP's `session/new` names them; an HTTP or SSE one at its relay, with the token in place of its headers. */
function acpServers(servers: readonly McpServer[], relay: HarnessRelay): acp.McpServer[] {
  let relayed = 0;
  return servers.map(({ name, connection }) =>
    connection.type === 'stdio'
      ? { name, command: connection.command, args: connection.args ?? [], env: [] }
      : { type: connection.type, name, url: relay.urls[++relayed]!, headers: [{ name: 'x-agentd-relay', value: relay.token }] },
  );
}

const STOP_REASONS: Record<string, StopReason> = { end_turn: 'end_turn', max_tokens: 'max_tokens', max_turn_requests: 'max_steps', refusal: 'end_turn', cancelled: 'cancelled' };

/** One turn of a coding-agent harness, told in the same native events as the built-in agent's. */
export async function* runHarnessTurn(harness: Harness, input: HarnessTurnInput): AsyncGenerator<AgentEvent> {
  const { template, history } = input;
  const { trailing } = collectCalls(history);
  const decided = trailing.filter((c) => c.approval?.approved !== undefined && !c.result);
  const setup: HarnessSetup = { endpoint: input.endpoint, folder: input.workdir, stateDir: input.stateDir, extras: template.harness.extras ?? {}, ...gatingOf(template) };
  await writeOwnFile(input.workdir, harness.instructionsFile, `${template.instructions.agents_md}\n`);

  yield { type: 'turn_start', data: { turn_id: input.turnId, session_id: input.sessionId, trace_id: input.traceId } };
  let pending: PendingInteraction | undefined;
  const reach: HarnessReach = { mcps: input.mcps, mcpLookup: input.mcpLookup, modelLookup: input.modelLookup, network: template.sandbox.permissions.network.mode, unsafeHost: input.unsafeHost, modelTimeoutMs: input.modelTimeoutMs, secrets: input.secretValues ?? [] };
  // The ACP client loads with the first harness turn: a server that runs none keeps 3–5 MB of heap.
  const { runAcpTurn } = await import('./acp-turn.ts');
  const turn = runAcpTurn({
    turnId: input.turnId,
    start: () => harnessProcess(harness, setup, reach),
    // Everything a start depends on; what differs per start (the relay's port and token) is not.
    fingerprint: JSON.stringify({ kind: harness.kind, endpoint: input.endpoint, gating: gatingOf(template), instructions: template.instructions.agents_md, extras: setup.extras, reach }),
    cwd: input.workdir,
    stateDir: input.stateDir,
    sessionMeta: harness.sessionMeta?.(setup),
    system: JSON.stringify(setup.extras),
    ...(decided.length === 0 && input.lastWords ? { lastWords: input.lastWords } : {}),
    prompt: (fresh) => promptOf(history, decided.length > 0, fresh),
    dialect: harness.dialect,
    gated: setup.gateAny,
    ...gatekeeper(harness, template, decided),
    newInteractionId: input.newInteractionId,
    signal: input.signal,
    parking: input.parking,
  });
  // A second of slack: some file systems keep modification times to the second.
  const startedAt = Date.now() - 1000;
  let next: IteratorResult<AgentEvent, AcpTurnEnd>;
  try {
    next = await turn.next();
    for (; !next.done; next = await turn.next()) {
      if (next.value.type === 'interaction_request') pending ??= next.value.data;
      yield next.value;
    }
  } finally {
    await scrubState(input.stateDir, startedAt, secretList([...reach.secrets, input.endpoint.apiKey]));
  }
  const end = next.value;
  if (end.usage) {
    const cost = input.pricing?.(template.llm.provider, template.llm.model, end.usage);
    yield { type: 'usage', data: cost === undefined ? end.usage : { ...end.usage, cost } };
  }
  yield doneEvent(end.paused ? 'paused' : (STOP_REASONS[end.stopReason] ?? 'end_turn'), end.paused ? pending : undefined);
}

/**
 * The harness a template names, checked before anything runs: undefined for agentd's own loop; a
 * 501 for a kind this version does not run yet; a 400 naming each template key the harness has no
 * place for, rather than dropping it.
 */
export function harnessFor(template: RunnableTemplate, allowStdioMcp: boolean): Harness | undefined {
  const kind = template.harness.kind;
  if (kind === 'agentd') return undefined;
  if (!Object.hasOwn(HARNESSES, kind)) {
    throw new AppError('not-implemented', `harness "${kind}" is not available in this version of agentd yet; it runs: agentd, ${Object.keys(HARNESSES).join(', ')}`);
  }
  const unsupported = [
    template.mcps.some((m) => m.policy !== undefined) && 'mcps[].policy',
    template.mcps.some((m) => m.connection.type !== 'stdio' && m.connection.forward_credentials) && 'mcps[].connection.forward_credentials',
    template.tools.some((t) => t.type === 'client') && 'client tools',
    template.runner.max_steps !== undefined && 'runner.max_steps',
    ...(HARNESSES[kind as HarnessKind].refuses?.(template) ?? []),
  ].filter((key): key is string => key !== false);
  const stdio = template.mcps.findIndex((m) => m.connection.type === 'stdio');
  if (stdio >= 0 && !allowStdioMcp) {
    throw new AppError('invalid-request', `data.parameters.agent.mcps[${stdio}].connection: stdio MCP servers are disabled on this server; the operator must set AGENTD_ALLOW_STDIO_MCP=1 to allow them`);
  }
  if (unsupported.length) {
    throw new AppError('invalid-request', `harness "${kind}" does not take ${unsupported.join(', ')} (data.parameters.agent) yet; remove them, or use harness "agentd"`);
  }
  return HARNESSES[kind as HarnessKind];
}
