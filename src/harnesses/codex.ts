import path from 'node:path';
import type { RunnableTemplate } from '../agent/template.ts';
import { gatingOf, type Harness, type HarnessSetup } from './harness.ts';

/** The variable that carries Codex's key (its relay token, relay.ts) to it: named in its config, set only in its environment. */
const KEY_VARIABLE = 'AGENTD_MODEL_API_KEY';

/**
 * Commands Codex runs without asking under `untrusted` because it knows them to only read. When
 * every call must reach agentd's gate (`ask`), a rule makes these ask too. A longer list costs
 * nothing: a call that asks is still decided by agentd's mode.
 */
const SAFE_COMMANDS = [
  'base64', 'basename', 'cat', 'cd', 'cmp', 'cut', 'date', 'df', 'diff', 'dirname', 'du', 'echo', 'egrep', 'env', 'expr',
  'false', 'fgrep', 'file', 'find', 'git', 'grep', 'head', 'hexdump', 'id', 'less', 'ls', 'md5sum', 'more', 'nl', 'numfmt',
  'od', 'paste', 'printenv', 'printf', 'pwd', 'readlink', 'realpath', 'rev', 'rg', 'sed', 'seq', 'sha1sum', 'sha256sum',
  'sort', 'stat', 'tac', 'tail', 'test', 'tr', 'tree', 'true', 'uname', 'uniq', 'wc', 'which', 'whoami', 'xxd',
];

/** What Codex adds to a call's input on each attempt: left out, so a call raised again is the same call. */
const PER_ATTEMPT = new Set(['call_id', 'turn_id', 'started_at_ms', 'completed_at_ms', 'process_id', 'source', 'available_decisions', 'proposed_execpolicy_amendment', 'parsed_cmd']);

/** A TOML basic string: JSON's escapes are TOML's, but for DEL, which TOML does not take raw. */
const toml = (value: string) => JSON.stringify(value).replaceAll('\x7f', '\\u007f');

/** `harness.extras.system`, in the state folder: Codex takes a replacement of its own instructions as a file. */
const INSTRUCTIONS_FILE = 'instructions.md';

/**
 * Codex's `config.toml`. Codex's own sandbox is off (`danger-full-access`): it runs inside agentd's
 * bubblewrap, whose seccomp filter does not let it build the nested namespaces its sandbox needs,
 * and agentd's wall is the same for every harness. Its approval policy then decides what asks:
 * `never` when nothing is gated, else `untrusted`, which asks before every command it does not
 * know to only read (and, with the rules file, before those too).
 */
function config({ endpoint, gateAny, extras, stateDir }: HarnessSetup): string {
  return [
    `model = ${toml(endpoint.model)}`,
    'model_provider = "agentd"',
    `approval_policy = ${toml(gateAny ? 'untrusted' : 'never')}`,
    'sandbox_mode = "danger-full-access"',
    'check_for_update_on_startup = false',
    // harness.extras: its own instructions replaced (from a file), or followed by a developer message.
    ...(extras.system === undefined ? [] : [`model_instructions_file = ${toml(path.join(stateDir, INSTRUCTIONS_FILE))}`]),
    ...(extras.append_system === undefined ? [] : [`developer_instructions = ${toml(extras.append_system)}`]),
    // The commands it runs never see the token: not in their environment, nor in a saved snapshot of it.
    '[shell_environment_policy]',
    `exclude = [${toml(KEY_VARIABLE)}]`,
    '[features]',
    'shell_snapshot = false',
    '[analytics]',
    'enabled = false',
    '[feedback]',
    'enabled = false',
    '[model_providers.agentd]',
    'name = "agentd"',
    `base_url = ${toml(endpoint.baseUrl)}`,
    'wire_api = "responses"',
    `env_key = ${toml(KEY_VARIABLE)}`,
    // A failed model call fails the turn at once, as in agentd's own loop.
    'request_max_retries = 0',
    'stream_max_retries = 0',
    '',
  ].join('\n');
}

/**
 * Codex over ACP (`@zed-industries/codex-acp`, one native binary with Codex built in;
 * reference/acp-harnesses.md §2). It reads AGENTS.md and `.agents/skills` in its working folder,
 * keeps its sessions under CODEX_HOME (the session's state folder here) and calls OpenAI's
 * Responses API. Every command runs through its one `exec_command` tool; files change through
 * `apply_patch` where the model has it.
 */
export const codex: Harness = {
  kind: 'codex',
  package: '@zed-industries/codex-acp',
  program: { module: `@zed-industries/codex-acp-${process.platform}-${process.arch}/bin/codex-acp`, native: true },
  instructionsFile: 'AGENTS.md',
  skillsDir: '.agents/skills',
  providers: ['openai'],
  toolNames: { bash: 'exec_command', write: 'apply_patch', edit: 'apply_patch' },
  refuses: (template: RunnableTemplate) => [
    ...template.tools.flatMap((t, i) =>
      t.type === 'builtin' && t.permission !== undefined && !Object.hasOwn(codex.toolNames, t.name)
        ? [`tools[${i}].permission ("${t.name}": Codex has no such tool, it reads by running commands: set the permission on "bash")`]
        : [],
    ),
    // Codex runs an MCP server's tools without asking its client: they could not be gated.
    ...(template.mcps.length && gatingOf(template).gateAny ? ['mcps with a permission mode other than "allow" (Codex runs MCP tools without asking)'] : []),
  ],
  env: ({ endpoint, stateDir }) => ({ CODEX_HOME: stateDir, [KEY_VARIABLE]: endpoint.apiKey }),
  settings: (setup) => [
    { path: 'config.toml', content: config(setup) },
    { path: INSTRUCTIONS_FILE, content: setup.extras.system },
    { path: 'rules/agentd.rules', content: setup.gateAll ? `prefix_rule(pattern=[${JSON.stringify(SAFE_COMMANDS)}], decision="prompt")\n` : '' },
  ],
  dialect: {
    asksTogether: true,
    toolName: (call) => {
      const mcp = mcpCall(call.rawInput);
      if (mcp) return `mcp__${mcp.server}__${mcp.tool}`;
      return hasCommand(call.rawInput) ? 'exec_command' : call.kind === 'edit' ? 'apply_patch' : (call.title ?? 'tool');
    },
    input: (raw) => {
      const mcp = mcpCall(raw);
      if (mcp) return mcp.arguments;
      return raw !== null && typeof raw === 'object' ? Object.fromEntries(Object.entries(raw).filter(([key]) => !PER_ATTEMPT.has(key))) : raw;
    },
    output: (raw) => {
      if (raw === null || typeof raw !== 'object' || !('exit_code' in raw)) return raw;
      const { exit_code, stdout, stderr } = raw as { exit_code: unknown; stdout?: unknown; stderr?: unknown };
      return { exit_code, stdout, stderr };
    },
    // Codex warns in the agent's voice when it has no metadata for the model: a notice, not the model's words.
    notice: (text) => text.startsWith('Model metadata for `'),
  },
};

/** An MCP tool's call, as Codex tells it: the server, the tool and its arguments. */
function mcpCall(raw: unknown): { server: string; tool: string; arguments: unknown } | undefined {
  const call = raw as { server?: unknown; tool?: unknown; arguments?: unknown } | null;
  return call !== null && typeof call === 'object' && typeof call.server === 'string' && typeof call.tool === 'string' ? { server: call.server, tool: call.tool, arguments: call.arguments ?? {} } : undefined;
}

function hasCommand(raw: unknown): boolean {
  return raw !== null && typeof raw === 'object' && Array.isArray((raw as { command?: unknown }).command);
}
