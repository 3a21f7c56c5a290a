import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { connectionAllowedHosts } from './agent/connection-address.ts';
import { allowedHosts } from './agent/mcp-address.ts';
import type { PriceTable } from './agent/pricing.ts';
import type { CallLimits } from './agent/tools/cgroups.ts';
import { DEMO_PROVIDER, PROVIDERS } from './contract/providers.ts';
import { isPostgresUrl, sqlitePathFromUrl } from './store/database-url.ts';
import type { PgBounds } from './store/pg-bounds.ts';
import { parseSecretKey } from './store/secret-box.ts';
import type { OtlpSettings } from './telemetry/tracing.ts';

/**
 * Server configuration, read once from the environment. Every variable is listed in the README's
 * configuration table; keep the two in step.
 */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  /** PostgreSQL connections per process. */
  pgPoolSize: number;
  /** PostgreSQL: how long a request waits for a connection, and for a statement's answer (0: no bound). */
  pgBounds: PgBounds;
  /** PostgreSQL: where the LISTEN connection goes when DATABASE_URL is a pooler in transaction mode. */
  databaseListenUrl: string | undefined;
  /** How often an idle evaluation driver (or, on PostgreSQL, the search for runs to share) looks again. */
  evalPollMs: number;
  /** AGENTD_SECRET_KEY, which seals stored provider keys; unset, the store keeps one in the data folder. */
  secretKey: Buffer | undefined;
  maxBodyBytes: number;
  /** Longest a request may take to arrive, headers and body (a client that stops sending gets 408). */
  requestTimeoutMs: number;
  /** Largest file one `PUT /api/sessions/{id}/files` may upload. */
  maxUploadBytes: number;
  /** Most files one request's messages may attach (each is written into the session folder). */
  maxAttachments: number;
  debug: boolean;
  logLevel: string;
  /** `json` lines, or `pretty` for a person reading a terminal (AGENTD_LOG_FORMAT; default: pretty when stdout is a terminal). */
  logFormat: 'json' | 'pretty';
  shutdownGraceMs: number;
  /** How long a session's lease lives without renewal: a crashed process frees its sessions after this. */
  leaseTtlMs: number;
  maxSteps: number;
  /** Worker threads that run turns beside the server's own (0: turns run on the server's thread). */
  turnWorkers: number;
  /** The server thread's load (event-loop utilization) above which new turns go to those threads; 0: every turn does. */
  turnWorkersLoad: number;
  /** Longest wait for the model: its answer, a stream's first part, or the next one. */
  modelTimeoutMs: number;
  /** How long a streamed reply waits for the turn's first output before it starts (an early failure is a JSON error until then). */
  streamHoldMs: number;
  /** Longest a turn runs, from its start to its end or pause, tools and model calls together. */
  turnTimeoutMs: number;
  /** Coding-agent harness processes this server runs at once (each holds a few hundred MB). */
  harnessMaxProcesses: number;
  /** How long a harness process waits, started, for its session's next turn (0: not at all). */
  harnessParkMs: number;
  /** The coding-agent harnesses this server runs (AGENTD_HARNESSES); a turn on another is refused. */
  harnesses: ReadonlyArray<OfferedHarness>;
  modelMaxRetries: number;
  bash: { timeoutMs: number; maxOutputBytes: number; unsafeHost: boolean; limits: CallLimits };
  /** Whether templates may name `stdio` MCP servers, which run a command on this host. */
  allowStdioMcp: boolean;
  /**
   * Deadline to connect to a template's MCP servers and list their tools, and for one MCP tool call;
   * the hosts and ranges HTTP and SSE servers may be at (AGENTD_MCP_ALLOWED_HOSTS; unset: any but
   * link-local and cloud metadata addresses).
   */
  mcp: { connectTimeoutMs: number; callTimeoutMs: number; allowedHosts: string[] | undefined };
  /**
   * The hosts and ranges project connections' base URLs may be at (AGENTD_CONNECTION_ALLOWED_HOSTS;
   * unset: any but link-local and cloud metadata addresses).
   */
  connections: { allowedHosts: string[] | undefined };
  defaultLlm: { provider: string; model: string };
  /** Named OpenAI-compatible endpoints: `{name: {base_url, api_key_env?}}` from AGENTD_OPENAI_COMPATIBLE. */
  openaiCompatible: Record<string, { base_url: string; api_key_env?: string }>;
  /** Model prices per million tokens from AGENTD_PRICES, for the cost recorded on turns. */
  prices: PriceTable;
  /** Origins whose browser pages may call the API (AGENTD_CORS_ORIGINS): a list, `*` for any, unset for none. */
  corsOrigins: string[] | '*' | undefined;
  /**
   * `GET /metrics`: off (the default), behind a bearer token (AGENTD_METRICS_TOKEN), or open to
   * whoever reaches the server (AGENTD_METRICS=open, for a network of your own).
   */
  metrics: { token: string } | 'open' | undefined;
  /** Where turns' spans go (OTEL_EXPORTER_OTLP_ENDPOINT and friends); unset, none are exported. */
  otlp: OtlpSettings | undefined;
  env: NodeJS.ProcessEnv;
}

/** A count; `least` 1 where 0 would leave nothing to do (a turn of no model step). */
function int(env: NodeJS.ProcessEnv, name: string, fallback: number, least: 0 | 1 = 0): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < least) {
    throw new Error(`${name} must be ${least === 0 ? 'a non-negative integer' : 'a whole number of 1 or more'}, got "${raw}"`);
  }
  return value;
}

/** setTimeout's longest delay: a longer one is taken as 1 ms, so a generous limit would end everything at once. */
const MAX_DELAY_MS = 2 ** 31 - 1;

/** A time in ms that ends up in a timer: at most MAX_DELAY_MS, and at least 1 where 0 would end every call at once. */
function ms(env: NodeJS.ProcessEnv, name: string, fallback: number, least: 0 | 1 = 0): number {
  const raw = env[name];
  const value = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(value) || value < least || value > MAX_DELAY_MS) {
    throw new Error(`${name} must be a whole number of milliseconds from ${least} to ${MAX_DELAY_MS} (about 24.8 days), got "${raw}"`);
  }
  return value;
}

function port(env: NodeJS.ProcessEnv): number {
  const value = Number(env.PORT || 8787);
  if (!Number.isInteger(value) || value < 0 || value > 65535) throw new Error(`PORT must be a port number from 0 to 65535, got "${env.PORT}"`);
  return value;
}

function share(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0 || value > 1) {
    throw new Error(`${name} must be a number from 0 to 1, got "${raw}"`);
  }
  return value;
}

const ON = ['1', 'true', 'yes', 'on'];
const OFF = ['', '0', 'false', 'no', 'off'];

/** A switch: a value that is neither on nor off is refused, not taken as off (AGENTD_UNSAFE_HOST_BASH=enabled would quietly not be). */
function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  const value = (env[name] ?? '').trim().toLowerCase();
  if (ON.includes(value)) return true;
  if (OFF.includes(value)) return false;
  throw new Error(`${name} must be 1 (on) or 0 (off), got "${env[name]}"`);
}

/** A setting written as JSON: parsed, then held to its shape, so a mistake stops the start instead of a turn (null, a list, a price in words). */
function json<T>(env: NodeJS.ProcessEnv, name: string, schema: z.ZodType<T>, example: string): T {
  const raw = env[name];
  if (!raw?.trim()) return schema.parse({});
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw new Error(`${name} must be JSON, e.g. ${example}`);
  }
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const at = issue.path.length ? ` at ${issue.path.map(String).join('.')}` : '';
  throw new Error(`${name} is not as agentd reads it${at}: ${issue.message}; write it as ${example}`);
}

const COMPATIBLE_ENDPOINTS = z.record(z.string(), z.object({ base_url: z.url({ protocol: /^https?$/ }), api_key_env: z.string().min(1).optional() }));
const PRICES = z.record(z.string(), z.object({ input: z.number().nonnegative(), output: z.number().nonnegative() }));

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return {
    port: port(env),
    // Empty is unset, as for every other setting: listen() given '' binds every interface.
    host: env.HOST?.trim() || '127.0.0.1',
    dataDir: path.resolve(env.AGENTD_DATA_DIR ?? '.agentd'),
    databaseUrl: databaseUrl(env.DATABASE_URL),
    pgPoolSize: Math.max(1, int(env, 'AGENTD_PG_POOL_SIZE', 10)),
    // Far above agentd's own statements (milliseconds; the largest, a test set of AGENTD_MAX_BODY
    // in one row, well under a second), short of a client's or load balancer's patience.
    pgBounds: { connectTimeoutMs: ms(env, 'AGENTD_PG_CONNECT_TIMEOUT_MS', 10_000), statementTimeoutMs: ms(env, 'AGENTD_PG_STATEMENT_TIMEOUT_MS', 30_000) },
    databaseListenUrl: listenUrl(env),
    evalPollMs: Math.max(10, ms(env, 'AGENTD_EVAL_POLL_MS', 1000)),
    secretKey: env.AGENTD_SECRET_KEY ? parseSecretKey(env.AGENTD_SECRET_KEY, 'AGENTD_SECRET_KEY') : undefined,
    maxBodyBytes: int(env, 'AGENTD_MAX_BODY', 10 * 1024 * 1024),
    requestTimeoutMs: Math.max(ms(env, 'AGENTD_REQUEST_TIMEOUT_MS', 120_000), 100),
    maxUploadBytes: int(env, 'AGENTD_MAX_UPLOAD', 10 * 1024 * 1024),
    maxAttachments: int(env, 'AGENTD_MAX_ATTACHMENTS', 100),
    debug: flag(env, 'AGENTD_DEBUG'),
    logLevel: logLevel(env.AGENTD_LOG_LEVEL),
    logFormat: logFormat(env.AGENTD_LOG_FORMAT),
    shutdownGraceMs: ms(env, 'AGENTD_SHUTDOWN_GRACE_MS', 30_000),
    leaseTtlMs: Math.max(ms(env, 'AGENTD_LEASE_TTL_MS', 15_000), 300),
    maxSteps: int(env, 'AGENTD_MAX_STEPS', 50, 1),
    turnWorkers: int(env, 'AGENTD_TURN_WORKERS', Math.min(os.availableParallelism() - 1, 4)),
    turnWorkersLoad: share(env, 'AGENTD_TURN_WORKERS_LOAD', 0.9),
    modelTimeoutMs: ms(env, 'AGENTD_MODEL_TIMEOUT_MS', 120_000, 1),
    streamHoldMs: ms(env, 'AGENTD_STREAM_HOLD_MS', 10_000),
    turnTimeoutMs: ms(env, 'AGENTD_TURN_TIMEOUT_MS', 30 * 60_000, 1),
    harnessMaxProcesses: int(env, 'AGENTD_HARNESS_MAX_PROCESSES', 8),
    harnessParkMs: ms(env, 'AGENTD_HARNESS_PARK_MS', 120_000),
    harnesses: offeredHarnesses(env.AGENTD_HARNESSES),
    modelMaxRetries: int(env, 'AGENTD_MODEL_MAX_RETRIES', 0),
    bash: {
      timeoutMs: ms(env, 'AGENTD_BASH_TIMEOUT_MS', 60_000, 1),
      maxOutputBytes: int(env, 'AGENTD_BASH_MAX_OUTPUT', 64 * 1024),
      unsafeHost: flag(env, 'AGENTD_UNSAFE_HOST_BASH'),
      limits: { processes: Math.max(int(env, 'AGENTD_BASH_MAX_PROCESSES', 256), 1), memoryBytes: Math.max(int(env, 'AGENTD_BASH_MAX_MEMORY_MB', 1024), 16) * 1024 * 1024 },
    },
    allowStdioMcp: flag(env, 'AGENTD_ALLOW_STDIO_MCP'),
    mcp: {
      connectTimeoutMs: ms(env, 'AGENTD_MCP_TIMEOUT_MS', 10_000, 1),
      callTimeoutMs: ms(env, 'AGENTD_MCP_CALL_TIMEOUT_MS', 120_000, 1),
      allowedHosts: allowedHosts(env.AGENTD_MCP_ALLOWED_HOSTS),
    },
    connections: { allowedHosts: connectionAllowedHosts(env.AGENTD_CONNECTION_ALLOWED_HOSTS) },
    defaultLlm: defaultLlm(env),
    openaiCompatible: json(env, 'AGENTD_OPENAI_COMPATIBLE', COMPATIBLE_ENDPOINTS, '{"vllm": {"base_url": "http://127.0.0.1:8000/v1", "api_key_env": "VLLM_API_KEY"}}'),
    prices: json(env, 'AGENTD_PRICES', PRICES, '{"openai/gpt-5-mini": {"input": 0.25, "output": 2}}'),
    corsOrigins: corsOrigins(env.AGENTD_CORS_ORIGINS),
    metrics: metricsAccess(env),
    otlp: otlpSettings(env),
    env,
  };
}

const OFFERED_HARNESSES = ['claude', 'codex', 'pi'] as const;
type OfferedHarness = (typeof OFFERED_HARNESSES)[number];

/** AGENTD_HARNESSES: unset, every harness installed; `none`, no harness; else the ones named, comma-separated. */
function offeredHarnesses(raw: string | undefined): ReadonlyArray<OfferedHarness> {
  const value = raw?.trim().toLowerCase() ?? '';
  if (value === '') return OFFERED_HARNESSES;
  if (value === 'none') return [];
  const named = value.split(',').map((name) => name.trim());
  const unknown = named.filter((name) => !(OFFERED_HARNESSES as readonly string[]).includes(name));
  if (unknown.length) throw new Error(`AGENTD_HARNESSES names ${unknown.map((name) => `"${name}"`).join(', ')}, which is no harness: give some of ${OFFERED_HARNESSES.join(', ')} (comma-separated), or none`);
  return named as OfferedHarness[];
}

/** What a model provider is reached with: a key, or an address of one's own. */
const PROVIDER_SETTINGS = ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_BASE_URL', 'OLLAMA_BASE_URL'];

/** Where model providers are reached; a value that is no URL failed every turn with 502 "Failed to parse URL". */
const PROVIDER_URLS = ['OPENAI_BASE_URL', 'ANTHROPIC_BASE_URL', 'OLLAMA_BASE_URL', 'AGENTD_DEMO_MODEL_URL'];

/**
 * The model a template that names none runs: AGENTD_DEFAULT_PROVIDER / AGENTD_DEFAULT_MODEL, else
 * OpenAI's gpt-5-mini; with no provider configured at all, the built-in demo model, so a first
 * run answers with no account (`agentd serve` starts it).
 */
function defaultLlm(env: NodeJS.ProcessEnv): Config['defaultLlm'] {
  // Checked here: a turn would blame the template's llm.provider, which named none.
  const known: string[] = [...PROVIDERS, DEMO_PROVIDER];
  if (env.AGENTD_DEFAULT_PROVIDER && !known.includes(env.AGENTD_DEFAULT_PROVIDER)) {
    throw new Error(`AGENTD_DEFAULT_PROVIDER must be one of ${known.join(', ')}, got "${env.AGENTD_DEFAULT_PROVIDER}"`);
  }
  for (const name of PROVIDER_URLS) {
    const url = env[name]?.trim();
    // The value is not echoed: a URL may carry credentials.
    if (url && !(URL.canParse(url) && /^https?:$/.test(new URL(url).protocol))) throw new Error(`${name} must be an http(s) URL, e.g. http://127.0.0.1:8000/v1`);
  }
  const chosen = env.AGENTD_DEFAULT_PROVIDER || env.AGENTD_DEFAULT_MODEL;
  if (!chosen && !PROVIDER_SETTINGS.some((name) => env[name])) return { provider: DEMO_PROVIDER, model: 'demo' };
  return { provider: env.AGENTD_DEFAULT_PROVIDER || 'openai', model: env.AGENTD_DEFAULT_MODEL || 'gpt-5-mini' };
}

function metricsAccess(env: NodeJS.ProcessEnv): Config['metrics'] {
  const token = env.AGENTD_METRICS_TOKEN?.trim();
  const mode = (env.AGENTD_METRICS ?? '').trim().toLowerCase();
  if (!['', 'off', 'open'].includes(mode)) throw new Error(`AGENTD_METRICS must be off or open, got "${env.AGENTD_METRICS}"; to require a token set AGENTD_METRICS_TOKEN instead`);
  if (token) {
    if (token.length < 16) throw new Error('AGENTD_METRICS_TOKEN must be at least 16 characters: it is all that guards the metrics');
    return { token };
  }
  return mode === 'open' ? 'open' : undefined;
}

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** pino's levels: any other name would stop the server at its start with pino's own stack trace. */
function logLevel(raw: string | undefined): string {
  if (raw === undefined || raw === '') return 'info';
  if (LOG_LEVELS.includes(raw)) return raw;
  throw new Error(`AGENTD_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${raw}"`);
}

function logFormat(raw: string | undefined): Config['logFormat'] {
  if (raw === undefined || raw === '') return process.stdout.isTTY ? 'pretty' : 'json';
  if (raw === 'json' || raw === 'pretty') return raw;
  throw new Error(`AGENTD_LOG_FORMAT must be json or pretty, got "${raw}"`);
}

/** `https://app.example.com,http://localhost:3000`: each an origin as a browser sends it, or `*`. */
function corsOrigins(raw: string | undefined): string[] | '*' | undefined {
  const origins = (raw ?? '').split(',').map((o) => o.trim()).filter(Boolean);
  if (origins.length === 0) return undefined;
  if (origins.includes('*')) return '*';
  for (const origin of origins) {
    if (!URL.canParse(origin) || new URL(origin).origin !== origin) {
      throw new Error(`AGENTD_CORS_ORIGINS: "${origin}" is not an origin; write scheme, host and port only, e.g. https://app.example.com or http://localhost:3000`);
    }
  }
  return origins;
}

/** DATABASE_URL: PostgreSQL or a SQLite file, refused here rather than with a stack trace from the store's open. */
function databaseUrl(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  if (!isPostgresUrl(raw)) sqlitePathFromUrl(raw);
  return raw;
}

/** AGENTD_DATABASE_LISTEN_URL: a PostgreSQL URL, and only beside a PostgreSQL DATABASE_URL. */
function listenUrl(env: NodeJS.ProcessEnv): string | undefined {
  const url = env.AGENTD_DATABASE_LISTEN_URL?.trim();
  if (!url) return undefined;
  if (!isPostgresUrl(url)) throw new Error('AGENTD_DATABASE_LISTEN_URL must be a postgres:// URL (a direct connection to the server DATABASE_URL reaches through a pooler)');
  if (!isPostgresUrl(env.DATABASE_URL)) throw new Error('AGENTD_DATABASE_LISTEN_URL is only read with a PostgreSQL DATABASE_URL; set DATABASE_URL=postgres://… or unset it');
  return url;
}

/**
 * The OpenTelemetry exporter's standard variables, as every OpenTelemetry SDK reads them
 * (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/): OTLP over
 * HTTP, with the JSON or the protobuf encoding. gRPC is refused at start rather than sending
 * requests the collector cannot read.
 */
function otlpSettings(env: NodeJS.ProcessEnv): OtlpSettings | undefined {
  // Lenient, as the OpenTelemetry SDKs read it: anything but a true value is false.
  if (ON.includes((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase())) return undefined;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const url = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || (base ? `${base.replace(/\/+$/, '')}/v1/traces` : undefined);
  if (!url) return undefined;
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) throw new Error(`OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL, got "${url}"`);
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf').trim();
  if (protocol !== 'http/json' && protocol !== 'http/protobuf') {
    throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL "${protocol}" is not supported: agentd exports OTLP over HTTP; set it to http/protobuf (the default) or http/json`);
  }
  const compression = (env.OTEL_EXPORTER_OTLP_TRACES_COMPRESSION || env.OTEL_EXPORTER_OTLP_COMPRESSION || 'none').trim();
  if (compression !== 'gzip' && compression !== 'none') throw new Error(`OTEL_EXPORTER_OTLP_COMPRESSION must be gzip or none, got "${compression}"`);
  const maxQueueSize = Math.max(1, int(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048));
  return {
    url,
    protocol,
    // Header names are case-insensitive; attribute keys are not.
    headers: Object.fromEntries(Object.entries(keyValues(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS || env.OTEL_EXPORTER_OTLP_HEADERS || '', 'OTEL_EXPORTER_OTLP_HEADERS')).map(([name, value]) => [name.toLowerCase(), value])),
    compression,
    timeoutMs: Math.max(1, ms(env, 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', ms(env, 'OTEL_EXPORTER_OTLP_TIMEOUT', 10_000))),
    serviceName: env.OTEL_SERVICE_NAME?.trim() || 'agentd',
    resource: keyValues(env.OTEL_RESOURCE_ATTRIBUTES || '', 'OTEL_RESOURCE_ATTRIBUTES'),
    batch: {
      scheduleDelayMs: Math.max(10, ms(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000)),
      maxQueueSize,
      maxExportBatchSize: Math.min(maxQueueSize, Math.max(1, int(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512))),
      exportTimeoutMs: Math.max(1, ms(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000)),
    },
  };
}

/** `key=value,key2=value2`, values percent-encoded (the OpenTelemetry convention). The values are never echoed: they are usually keys. */
function keyValues(raw: string, variable: string): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const pair of raw.split(',')) {
    if (!pair.trim()) continue;
    const at = pair.indexOf('=');
    const name = at > 0 ? pair.slice(0, at).trim() : '';
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new Error(`${variable} must be key=value pairs separated by commas`);
    try {
      pairs[name] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      throw new Error(`${variable}: the value of "${name}" is not valid percent-encoding`);
    }
  }
  return pairs;
}
