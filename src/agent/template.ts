import { AgentTemplate, HARNESS_KINDS, PRE_MIGRATION_KEYS, RUNNER_KINDS, SANDBOX_KINDS, type PermissionMode, type ToolEntry, BUILTIN_TOOLS } from '../contract/template.ts';
import { describeIssue, jsonPath } from '../contract/zod-errors.ts';
import { AppError } from '../errors.ts';
import type { ErrorType } from '../contract/errors.ts';

/** The model a turn runs on, with provider and model known. */
export interface EffectiveLlm {
  provider: string;
  model: string;
  connection: { mode: 'self_managed' | 'project'; slug?: string };
  extras: Record<string, unknown>;
}

/**
 * `llm` naming a project connection: the connection supplies the provider and the model the
 * template leaves out, so they stay unset until the turn reads it (and the server's defaults,
 * meant for its own provider, never stand in for them).
 */
interface ProjectLlm {
  provider?: string;
  model?: string;
  connection: { mode: 'project'; slug: string };
  extras: Record<string, unknown>;
}

/** A template with every default filled in: what a turn runs, once a project connection is read. */
export interface EffectiveTemplate {
  instructions: { agents_md: string };
  llm: EffectiveLlm | ProjectLlm;
  tools: ToolEntry[];
  mcps: NonNullable<AgentTemplate['mcps']>;
  skills: NonNullable<AgentTemplate['skills']>;
  /** `system` replaces the harness's own system prompt (agentd's: where its folder is), `append_system` follows it. */
  harness: { kind: string; extras?: HarnessExtras };
  runner: { kind: string; permissions: { default: PermissionMode }; max_steps?: number };
  sandbox: { kind: string; permissions: { network: { mode: 'on' | 'off' } } };
}

/** A template whose model is settled: what a turn runs. */
export type RunnableTemplate = EffectiveTemplate & { llm: EffectiveLlm };

const DEFAULT_INSTRUCTIONS =
  'You are a helpful agent working in a private folder. Use the tools to read and change files there; ' +
  'explain briefly what you did.';

export function defaultTemplate(defaultLlm: { provider: string; model: string }): RunnableTemplate {
  return {
    instructions: { agents_md: DEFAULT_INSTRUCTIONS },
    llm: { ...defaultLlm, connection: { mode: 'self_managed' }, extras: {} },
    tools: BUILTIN_TOOLS.map((name) => ({ type: 'builtin', name }) as ToolEntry),
    mcps: [],
    skills: [],
    harness: { kind: 'agentd' },
    runner: { kind: 'local', permissions: { default: 'allow_reads' } },
    sandbox: { kind: 'local', permissions: { network: { mode: 'off' } } },
  };
}

/** Where a request's template is, unless it came from elsewhere (an inline revision). */
const TEMPLATE_PATH = 'data.parameters.agent';

function fail(type: ErrorType, message: string): never {
  throw new AppError(type, message);
}

function checkShape(raw: unknown, at: string): void {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    fail('invalid-template-shape', `the agent template must be an object at ${at}`);
  }
  const obj = raw as Record<string, unknown>;
  for (const key of PRE_MIGRATION_KEYS) {
    if (key in obj) {
      fail(
        'invalid-template-shape',
        `"${key}" at ${at}.${key} is a pre-migration flat key; use the nested layout (instructions.agents_md, llm.model, mcps, harness.kind)`,
      );
    }
  }
  for (const key of ['harness', 'sandbox', 'runner'] as const) {
    if (typeof obj[key] === 'string') {
      fail('invalid-template-shape', `${at}.${key} must be an object such as {"kind": "${obj[key]}"}, not a string (pre-migration layout)`);
    }
  }
}

function checkKind(kind: string | null | undefined, known: readonly string[], at: string, where: string): void {
  if (kind != null && !known.includes(kind)) {
    fail('unsupported-kind', `unknown kind "${kind}" at ${at}.${where}; known: ${known.join(', ')}`);
  }
}

/**
 * Validates a raw template and fills defaults. The error type names the rule that was broken so a
 * client can tell a stale template (invalid-template-shape) from a typo (unknown-template-key).
 * `at` is where the template sits in the request, which the errors name.
 */
export function parseTemplate(raw: unknown, defaultLlm: { provider: string; model: string }, at = TEMPLATE_PATH): EffectiveTemplate {
  const base = defaultTemplate(defaultLlm);
  if (raw === undefined || raw === null) return base;
  checkShape(raw, at);
  const parsed = AgentTemplate.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const path = issue.path;
    if (issue.code === 'unrecognized_keys') fail('unknown-template-key', describeIssue(at, issue));
    if (path[0] === 'runner' && path[1] === 'permissions' && path[2] === 'default') {
      fail('invalid-permission-mode', `${jsonPath(at, path)} must be one of allow, ask, allow_reads, deny`);
    }
    fail('invalid-request', describeIssue(at, issue));
  }
  const t = parsed.data;
  checkKind(t.harness?.kind, HARNESS_KINDS, at, 'harness.kind');
  checkKind(t.runner?.kind, RUNNER_KINDS, at, 'runner.kind');
  checkKind(t.sandbox?.kind, SANDBOX_KINDS, at, 'sandbox.kind');

  const seen = new Set<string>();
  for (const [i, tool] of (t.tools ?? []).entries()) {
    if (seen.has(tool.name)) fail('invalid-request', `duplicate tool name "${tool.name}" at ${at}.tools[${i}].name`);
    if (tool.type === 'client' && (BUILTIN_TOOLS as readonly string[]).includes(tool.name)) {
      fail('invalid-request', `client tool "${tool.name}" at ${at}.tools[${i}].name uses a built-in tool's name`);
    }
    seen.add(tool.name);
  }

  const skillNames = new Set<string>();
  for (const [i, skill] of (t.skills ?? []).entries()) {
    if (skillNames.has(skill.name)) fail('invalid-request', `duplicate skill name "${skill.name}" at ${at}.skills[${i}].name`);
    skillNames.add(skill.name);
  }

  const llm = t.llm ?? {};
  let provider = llm.provider ?? undefined;
  let model = llm.model ?? undefined;
  if (!provider && model?.includes('/')) {
    // "provider/model" is accepted as in the reference implementation.
    const slash = model.indexOf('/');
    provider = model.slice(0, slash);
    model = model.slice(slash + 1);
  }
  const connection = fromReferenceMode(llm.connection ?? { mode: 'self_managed' as const });
  let effectiveLlm: EffectiveLlm | ProjectLlm;
  if (connection.mode === 'project') {
    if (!connection.slug) {
      fail('invalid-request', `${at}.llm.connection.slug is required with mode "project": the slug of a connection of this project (GET /api/connections lists them)`);
    }
    effectiveLlm = { ...(provider ? { provider } : {}), ...(model ? { model } : {}), connection: { mode: 'project', slug: connection.slug }, extras: llm.extras ?? {} };
  } else {
    effectiveLlm = {
      provider: provider ?? base.llm.provider,
      model: model ?? base.llm.model,
      connection: connection.slug ? { mode: connection.mode, slug: connection.slug } : { mode: connection.mode },
      extras: llm.extras ?? {},
    };
  }
  return {
    instructions: { agents_md: t.instructions?.agents_md ?? base.instructions.agents_md },
    llm: effectiveLlm,
    tools: t.tools ?? base.tools,
    mcps: t.mcps ?? [],
    skills: t.skills ?? [],
    harness: { kind: t.harness?.kind === 'pi_core' ? 'pi' : (t.harness?.kind ?? 'agentd'), ...harnessExtras(t.harness?.extras) },
    runner: {
      kind: t.runner?.kind ?? 'local',
      permissions: { default: t.runner?.permissions?.default ?? base.runner.permissions.default },
      ...(t.runner?.max_steps ? { max_steps: t.runner.max_steps } : {}),
    },
    sandbox: { kind: t.sandbox?.kind ?? 'local', permissions: { network: { mode: t.sandbox?.permissions?.network?.mode ?? 'off' } } },
  };
}

export interface HarnessExtras {
  system?: string;
  append_system?: string;
}

function harnessExtras(given: NonNullable<AgentTemplate['harness']>['extras']): { extras?: HarnessExtras } {
  const extras: HarnessExtras = {};
  if (given?.system != null) extras.system = given.system;
  if (given?.append_system != null) extras.append_system = given.append_system;
  return Object.keys(extras).length ? { extras } : {};
}

type TemplateConnection = NonNullable<NonNullable<AgentTemplate['llm']>['connection']>;

/**
 * The reference's `agenta` mode names a connection the platform keeps (by `slug`) or, without one,
 * the platform's own keys: here a project connection, or the server's keys (`self_managed`).
 */
function fromReferenceMode({ mode, slug }: TemplateConnection): { mode: 'self_managed' | 'project'; slug?: string | null | undefined } {
  if (mode !== 'agenta') return { mode, slug };
  return slug ? { mode: 'project', slug } : { mode: 'self_managed' };
}
