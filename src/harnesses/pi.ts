import path from 'node:path';
import type { ModelEndpoint } from '../agent/model.ts';
import type { RunnableTemplate } from '../agent/template.ts';
import type { Harness, HarnessSetup } from './harness.ts';
import { resolveModule } from './resolve-module.ts';

/** The variable that carries Pi's key (its relay token, relay.ts) to it: its models.json names it, its environment holds it. */
const KEY_VARIABLE = 'AGENTD_MODEL_API_KEY';

/** Pi's API for each provider agentd knows. */
const PI_API = { openai: 'openai-responses', anthropic: 'anthropic-messages', ollama: 'openai-completions', 'openai-compatible': 'openai-completions' } as const;

/** Pi's tools that only read: asked about only when every call is gated. */
const READ_TOOLS = ['read', 'grep', 'find', 'ls'];

/** Pi's package, by a file it exports: its command line `cli.js` sits beside it. */
const PI_MODULE = '@earendil-works/pi-coding-agent/rpc-entry';

/** `~/.pi/agent/models.json`: one provider, agentd's, with the template's model; its key by its variable's name. */
function models(endpoint: ModelEndpoint): string {
  const provider = { baseUrl: endpoint.baseUrl, api: PI_API[endpoint.provider], apiKey: `$${KEY_VARIABLE}`, models: [{ id: endpoint.model }] };
  return JSON.stringify({ providers: { agentd: provider } });
}

/**
 * Pi has no permission system of its own (reference/acp-harnesses.md §2): this extension gives it
 * one. Before a gated tool runs it asks through the extension UI, which pi-acp turns into an ACP
 * permission request: the tool's name as the title, its input as JSON as the message (what the
 * gate matches a recorded decision on). It also runs `bash` without the relay token in the
 * command's environment.
 */
function gateExtension({ gateAll, gateAny }: HarnessSetup): string {
  const ask = gateAll ? 'all' : gateAny ? 'changes' : 'none';
  return `// Written by agentd for every start: its permission modes on Pi (docs/harnesses.md).
import { createBashTool } from "@earendil-works/pi-coding-agent";

const ASK = ${JSON.stringify(ask)};
const READS = new Set(${JSON.stringify(READ_TOOLS)});

export default function (pi) {
  const bash = createBashTool(process.cwd(), {
    spawnHook: (spawn) => {
      const env = { ...spawn.env };
      delete env[${JSON.stringify(KEY_VARIABLE)}];
      return { ...spawn, env };
    },
  });
  pi.registerTool({ ...bash, execute: (id, params, signal, onUpdate) => bash.execute(id, params, signal, onUpdate) });
  pi.on("tool_call", async (event, ctx) => {
    if (ASK === "none" || (ASK === "changes" && READS.has(event.toolName))) return undefined;
    const allowed = await ctx.ui.confirm(event.toolName, JSON.stringify(event.input ?? {}));
    return allowed ? undefined : { block: true, reason: "Tool call denied" };
  });
}
`;
}

/**
 * Pi over ACP (`pi-acp`, which runs Pi's own `pi --mode rpc`; reference/acp-harnesses.md §2). It
 * reads AGENTS.md and `.agents/skills` in its working folder, keeps its sessions under
 * `~/.pi` (HOME is the session's state folder here), and calls any of the providers agentd knows.
 */
export const pi: Harness = {
  kind: 'pi',
  package: 'pi-acp @earendil-works/pi-coding-agent',
  program: { module: 'pi-acp/dist/index.js', native: false, requires: [PI_MODULE] },
  instructionsFile: 'AGENTS.md',
  skillsDir: '.agents/skills',
  providers: ['openai', 'anthropic', 'ollama', 'openai-compatible'],
  toolNames: { read: 'read', write: 'write', edit: 'edit', bash: 'bash', grep: 'grep', find: 'find', ls: 'ls' },
  refuses: (template: RunnableTemplate) => (template.mcps.length ? ['mcps (Pi takes no MCP servers)'] : []),
  env: ({ endpoint, stateDir }) => ({
    HOME: stateDir,
    [KEY_VARIABLE]: endpoint.apiKey,
    // Pi itself, which pi-acp starts: named here, since it is not on the sandbox's PATH.
    PI_ACP_PI_COMMAND: path.join(path.dirname(resolveModule(PI_MODULE)), 'cli.js'),
    // No update checks or registry look-ups: pi-acp asks npm for Pi's latest version on every new session.
    PI_OFFLINE: '1',
    PI_SKIP_VERSION_CHECK: '1',
    npm_config_offline: 'true',
  }),
  settings: (setup) => [
    { path: '.pi/agent/models.json', content: models(setup.endpoint) },
    {
      path: '.pi/agent/settings.json',
      // The session folder's own `.pi` settings and extensions never load (what the agent writes
      // there cannot reconfigure it); the template's skills are named here instead.
      content: JSON.stringify({
        defaultProvider: 'agentd',
        defaultModel: setup.endpoint.model,
        quietStartup: true,
        enableInstallTelemetry: false,
        defaultProjectTrust: 'never',
        // A failed model call fails the turn at once, as in agentd's own loop.
        retry: { enabled: false },
        skills: [path.join(setup.folder, pi.skillsDir)],
      }),
    },
    { path: '.pi/agent/extensions/agentd-gate.ts', content: gateExtension(setup) },
    // Pi's own prompt replaced, or added to (harness.extras); removed when not asked for.
    { path: '.pi/agent/SYSTEM.md', content: setup.extras.system },
    { path: '.pi/agent/APPEND_SYSTEM.md', content: setup.extras.append_system },
  ],
  dialect: {
    asksAfterStart: true,
    toolName: (call) => {
      const asked = confirmation(call.rawInput);
      if (asked) return asked.title;
      return call.kind === 'execute' ? 'bash' : (call.title ?? 'tool');
    },
    input: (raw) => {
      const asked = confirmation(raw);
      if (!asked) return raw;
      try {
        return JSON.parse(asked.message) as unknown;
      } catch {
        return asked.message;
      }
    },
  },
};

/** The gate extension's question, as pi-acp tells it: the tool's name and its input as JSON. */
function confirmation(raw: unknown): { title: string; message: string } | undefined {
  const asked = raw as { method?: unknown; title?: unknown; message?: unknown } | null;
  return asked !== null && typeof asked === 'object' && asked.method === 'confirm' && typeof asked.title === 'string' && typeof asked.message === 'string'
    ? { title: asked.title, message: asked.message }
    : undefined;
}
