import { z } from 'zod';
import { DEMO_PROVIDER, PROVIDERS } from './providers.ts';

/**
 * The agent template, `data.parameters.agent` (spec §2.3, design.md §4). Every key may be omitted;
 * `defaultTemplate` in `src/agent/template.ts` fills the gaps. Objects are strict: an unknown key is a
 * 400 naming it, so a typo never silently runs a different agent.
 */

export const PermissionMode = z.enum(['allow', 'ask', 'allow_reads', 'deny']);
export type PermissionMode = z.infer<typeof PermissionMode>;

export const ToolPermission = z.enum(['allow', 'ask', 'deny']);
export type ToolPermission = z.infer<typeof ToolPermission>;

export const BUILTIN_TOOLS = ['read', 'write', 'edit', 'ls', 'find', 'grep', 'bash'] as const;
export const BuiltinToolName = z.enum(BUILTIN_TOOLS);
export type BuiltinToolName = z.infer<typeof BuiltinToolName>;

const toolName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a tool name is 1-64 letters, digits, "_" or "-"');

const BuiltinTool = z.strictObject({
  type: z.literal('builtin'),
  name: BuiltinToolName,
  permission: ToolPermission.nullish(),
  render: z.record(z.string(), z.unknown()).nullish(),
});

const ClientTool = z.strictObject({
  type: z.literal('client'),
  name: toolName,
  description: z.string().max(4096).optional(),
  input_schema: z.record(z.string(), z.unknown()).optional(),
  permission: ToolPermission.nullish(),
  render: z.record(z.string(), z.unknown()).nullish(),
});

export const ToolEntry = z.discriminatedUnion('type', [BuiltinTool, ClientTool]);
export type ToolEntry = z.infer<typeof ToolEntry>;

/** A header name as HTTP has them (RFC 9110's token): any other fails only as the server connects. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export const McpServer = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9._-]{1,128}$/),
  connection: z.discriminatedUnion('type', [
    z.strictObject({
      type: z.enum(['http', 'sse']),
      url: z.url().meta({
        description: "The server's MCP endpoint. Refused (400) at a link-local address or a cloud metadata service (169.254.169.254, fd00:ec2::254, …), or outside AGENTD_MCP_ALLOWED_HOSTS where the operator set it",
      }),
      headers: z.record(z.string().regex(HEADER_NAME, { message: 'an HTTP header name is letters, digits and !#$%&\'*+-.^_`|~ only' }), z.string()).optional(),
      forward_credentials: z.boolean().optional(),
    }),
    z
      .strictObject({
        type: z.literal('stdio'),
        command: z.string().min(1),
        args: z.array(z.string()).optional(),
      })
      .meta({ description: 'Runs a command on the server host: refused (400) unless the operator set AGENTD_ALLOW_STDIO_MCP=1' }),
  ]),
  policy: z
    .strictObject({
      tools: z
        .strictObject({ mode: z.enum(['all', 'include']), names: z.array(z.string()).optional() })
        .optional(),
      permission: ToolPermission.nullish(),
    })
    .optional(),
});
export type McpServer = z.infer<typeof McpServer>;

export const Skill = z.strictObject({
  name: z.string().max(64).regex(/^[a-z0-9]+(-[a-z0-9]+)*$/),
  description: z.string().min(1).max(1024),
  body: z.string().min(1).max(50_000),
  files: z
    .array(
      z.strictObject({
        path: z
          .string()
          .min(1)
          .max(255)
          .refine((p) => !p.startsWith('/') && !p.includes('\\') && !p.split('/').some((part) => part === '..' || part === '.' || part === ''), {
            message: 'a skill file path is relative, with "/" between names and no ".", ".." or empty parts',
          })
          .refine((p) => p !== 'SKILL.md', { message: 'SKILL.md is written from the skill body; name the file differently' }),
        content: z.string().max(200_000),
        executable: z.boolean().optional(),
      }),
    )
    .optional(),
});
export type Skill = z.infer<typeof Skill>;

/** `pi_core` is the reference's name for `pi`. */
export const HARNESS_KINDS = ['agentd', 'claude', 'codex', 'pi', 'pi_core'] as const;
export const RUNNER_KINDS = ['local', 'sidecar'] as const;
export const SANDBOX_KINDS = ['local'] as const;

const extras = z.record(z.string(), z.unknown()).nullish();

export const AgentTemplate = z.strictObject({
  instructions: z.strictObject({ agents_md: z.string().max(1_000_000) }).nullish(),
  llm: z
    .strictObject({
      // Checked when the model is made, where the error lists the providers; the document lists them too.
      provider: z.string().min(1).meta({ enum: [...PROVIDERS, DEMO_PROVIDER] }).nullish(),
      model: z.string().min(1).nullish(),
      connection: z
        .strictObject({
          /** `agenta` is the reference's name: with a slug a `project` connection, without one the server's keys. */
          mode: z.enum(['self_managed', 'project', 'agenta']),
          slug: z.string().min(1).nullish(),
        })
        .nullish(),
      extras,
    })
    .nullish(),
  tools: z.array(ToolEntry).nullish(),
  mcps: z.array(McpServer).nullish(),
  skills: z.array(Skill).nullish(),
  harness: z
    .strictObject({
      // Left out, it is `agentd`, as runner's and sandbox's kinds are their defaults (design.md §4).
      kind: z.string().min(1).meta({ enum: [...HARNESS_KINDS] }).nullish(),
      /** The reference's Pi extras, on every harness: its own system prompt replaced, or added to. */
      extras: z.strictObject({ system: z.string().max(1_000_000).nullish(), append_system: z.string().max(1_000_000).nullish() }).nullish(),
    })
    .nullish(),
  runner: z
    .strictObject({
      kind: z.string().min(1).meta({ enum: [...RUNNER_KINDS] }).nullish(),
      permissions: z.strictObject({ default: PermissionMode.nullish() }).nullish(),
      max_steps: z.number().int().min(1).max(500).nullish(),
      extras,
    })
    .nullish(),
  sandbox: z
    .strictObject({
      kind: z.string().min(1).meta({ enum: [...SANDBOX_KINDS] }).nullish(),
      permissions: z
        .strictObject({ network: z.strictObject({ mode: z.enum(['on', 'off']) }).nullish() })
        .nullish(),
      extras,
    })
    .nullish(),
});
export type AgentTemplate = z.infer<typeof AgentTemplate>;

/** A template as the API reference's examples write one: a model, a tool, and its calls asked for approval. */
export const EXAMPLE_TEMPLATE: z.input<typeof AgentTemplate> = {
  instructions: { agents_md: 'You answer customer questions briefly and politely.' },
  llm: { provider: 'openai', model: 'gpt-5-mini' },
  tools: [{ type: 'builtin', name: 'write' }],
  runner: { permissions: { default: 'ask' } },
};

/**
 * Keys of the pre-migration flat layout (`agent_config`). Spec §2.3 and §9.3: a template that
 * still uses them is refused, never half-understood.
 */
export const PRE_MIGRATION_KEYS = [
  'agents_md',
  'model',
  'mcp_servers',
  'harness_kwargs',
  'harness_options',
  'permission_policy',
] as const;
