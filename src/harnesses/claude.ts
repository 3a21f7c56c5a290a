import type { BuiltinToolName } from '../contract/template.ts';
import type { ModelEndpoint } from '../agent/model.ts';
import type { HarnessDialect } from './acp-turn.ts';

/**
 * Claude Code over ACP (`@zed-industries/claude-agent-acp`, reference/acp-harnesses.md §2). It
 * reads its instructions from CLAUDE.md in its working folder, keeps its sessions and settings
 * under HOME (the session's state folder here), and calls Anthropic's Messages API.
 */
export const claude = {
  kind: 'claude',
  package: '@zed-industries/claude-agent-acp',
  entry: 'dist/index.js',
  instructionsFile: 'CLAUDE.md',
  /** Where Claude finds a project's skills, in its working folder. */
  skillsDir: '.claude/skills',
  provider: 'anthropic',
  /** Claude's tools that agentd's built-in names stand for, so a tool entry's `permission` reaches them. */
  toolNames: { read: 'Read', write: 'Write', edit: 'Edit', ls: 'LS', find: 'Glob', grep: 'Grep', bash: 'Bash' } satisfies Record<BuiltinToolName, string>,
  /** What Claude runs without asking in its default mode: listed as `ask` rules when every call must be gated. */
  readTools: ['Read', 'Glob', 'Grep', 'LS', 'WebFetch', 'WebSearch', 'NotebookRead'],
  env(endpoint: ModelEndpoint, stateDir: string): Record<string, string> {
    return {
      HOME: stateDir,
      ANTHROPIC_BASE_URL: endpoint.baseUrl,
      ANTHROPIC_API_KEY: endpoint.apiKey,
      ANTHROPIC_MODEL: endpoint.model,
      // No update checks, telemetry, error reports or other calls home: the model endpoint only.
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_ERROR_REPORTING: '1',
    };
  },
  /** `~/.claude/settings.json`: ask before the read tools too, when every call is gated. */
  settings(gateReads: boolean): { path: string; content: string } {
    return { path: '.claude/settings.json', content: JSON.stringify({ permissions: { ask: gateReads ? [...claude.readTools] : [] } }) };
  },
  dialect: {
    toolName: (update) => {
      const meta = update._meta?.claudeCode as { toolName?: unknown } | undefined;
      return typeof meta?.toolName === 'string' ? meta.toolName : (update.title ?? 'tool');
    },
  } satisfies HarnessDialect,
} as const;
