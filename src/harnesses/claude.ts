import type { Harness } from './harness.ts';

/** What Claude runs without asking in its default mode: listed as `ask` rules when every call must be gated. */
const READ_TOOLS = ['Read', 'Glob', 'Grep', 'LS', 'WebFetch', 'WebSearch', 'NotebookRead'];

/**
 * Claude Code over ACP (`@zed-industries/claude-agent-acp`, reference/acp-harnesses.md §2). It
 * reads its instructions from CLAUDE.md in its working folder, keeps its sessions and settings
 * under HOME (the session's state folder here), and calls Anthropic's Messages API. Its default
 * mode asks before every tool that changes anything; reads are gated by `ask` rules.
 */
export const claude: Harness = {
  kind: 'claude',
  package: '@zed-industries/claude-agent-acp',
  program: { module: '@zed-industries/claude-agent-acp/dist/index.js', native: false },
  // Claude Code queues its transcript's lines and writes them every 100 ms.
  writeBehindMs: 150,
  instructionsFile: 'CLAUDE.md',
  skillsDir: '.claude/skills',
  providers: ['anthropic'],
  toolNames: { read: 'Read', write: 'Write', edit: 'Edit', ls: 'LS', find: 'Glob', grep: 'Grep', bash: 'Bash' },
  env: ({ endpoint, stateDir }) => ({
    HOME: stateDir,
    ANTHROPIC_BASE_URL: endpoint.baseUrl,
    ANTHROPIC_API_KEY: endpoint.apiKey,
    ANTHROPIC_MODEL: endpoint.model,
    // The commands it runs (Bash, hooks, MCP servers) do not see its key, the relay token.
    CLAUDE_CODE_SUBPROCESS_ENV_SCRUB: '1',
    // No update checks, telemetry, error reports or other calls home: the model endpoint only.
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    // A failed model call fails the turn at once, as in agentd's own loop (AGENTD_MODEL_MAX_RETRIES
    // is 0 by default): the caller gets its status and decides.
    CLAUDE_CODE_MAX_RETRIES: '0',
  }),
  settings: ({ gateAll }) => [{ path: '.claude/settings.json', content: JSON.stringify({ permissions: { ask: gateAll ? READ_TOOLS : [] } }) }],
  // The session folder's own .claude/settings*.json, which an upload or the agent itself can
  // write, must not change what asks: managed settings take precedence over every other source
  // (the ACP adapter reads them too, which otherwise takes permissions.defaultMode from the
  // folder), fix the mode, and allow no permission rules or hooks but these.
  lockedSettings: ({ gateAll }) => ({
    at: '/etc/claude-code/managed-settings.json',
    content: JSON.stringify({
      permissions: { defaultMode: 'default', ask: gateAll ? READ_TOOLS : [] },
      allowManagedPermissionRulesOnly: true,
      allowManagedHooksOnly: true,
      enableAllProjectMcpServers: false,
    }),
  }),
  // Its ACP adapter takes a whole system prompt as a string, or text after its own as `append`.
  sessionMeta: ({ extras }) => {
    if (extras.system !== undefined) return { systemPrompt: extras.append_system === undefined ? extras.system : `${extras.system}\n\n${extras.append_system}` };
    return extras.append_system === undefined ? undefined : { systemPrompt: { append: extras.append_system } };
  },
  dialect: {
    toolName: (update) => {
      const meta = update._meta?.claudeCode as { toolName?: unknown } | undefined;
      return typeof meta?.toolName === 'string' ? meta.toolName : (update.title ?? 'tool');
    },
  },
};
