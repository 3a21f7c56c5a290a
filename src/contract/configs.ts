import { z } from 'zod';
import { withExample } from './example.ts';
import { REFERENCE_FAMILIES, References } from './invoke.ts';
import { EXAMPLE_TEMPLATE } from './template.ts';

const REFERENCE_FAMILY_KEYS = [...REFERENCE_FAMILIES.workflow, ...REFERENCE_FAMILIES.application, ...REFERENCE_FAMILIES.evaluator];
const ENVIRONMENT_KEYS = [...REFERENCE_FAMILIES.environment];

/**
 * Stored configurations (spec §2.4; design.md §3 `configs/`): workflows, each of one family, with
 * variants whose revisions are immutable and numbered; and environments, whose revisions map keys
 * to deployed workflow revisions. Shapes follow the reference's (`data.parameters`, `@ag.embed`,
 * environment `data.references`) so configurations move between the two.
 */

/** The built-in agent workflow's URI, as the reference names it so its clients recognise it. */
export const AGENT_WORKFLOW_URI = 'agenta:builtin:agent:v0';

const WORKFLOW_FAMILIES = ['workflow', 'application', 'evaluator'] as const;
export const WorkflowFamily = z.enum(WORKFLOW_FAMILIES);
export type WorkflowFamily = z.infer<typeof WorkflowFamily>;

/** Paths take an id or a slug, so a slug may not look like an id. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const ConfigSlug = z
  .string()
  .regex(/^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/, { message: 'a slug is 1-128 letters, digits, ".", "_" or "-", not starting with "." or "-"' })
  .refine((slug) => !UUID.test(slug), { message: 'a slug cannot have the form of an id (a UUID)' });

/** A deployment key inside an environment; by default the deployed workflow's slug. */
const DeploymentKey = ConfigSlug;

const record = z.record(z.string(), z.unknown());

/**
 * A revision's payload. `parameters.agent`, when present, is an agent template and is validated
 * at commit (embeds resolved first); other parameters (a skill, a tool, a prompt) are stored as
 * given, for templates to embed.
 */
export const RevisionData = z.looseObject({
  uri: z
    .string()
    .min(1)
    .max(256)
    // Checked at commit against the workflows this server runs (configs/service.ts); today one.
    .meta({ enum: [AGENT_WORKFLOW_URI], description: 'What runs this revision; absent means the agent workflow (agenta:builtin:agent:v0)' })
    .optional(),
  parameters: record
    .meta({
      description:
        'agent: an agent template (AgentTemplate), checked at commit as invoke checks it, or an @ag.embed of one; evaluator: an evaluator (as in an evaluation\'s evaluators); any other key is stored as given, for templates to embed',
    })
    .optional(),
});
export type RevisionData = z.infer<typeof RevisionData>;

const CommitMessage = z.string().max(4096);

export const WorkflowCreate = withExample(
  z.strictObject({
    slug: ConfigSlug,
    family: WorkflowFamily.default('workflow'),
    name: z.string().min(1).max(256).optional(),
    description: z.string().max(4096).optional(),
    /** The first variant's slug. */
    variant: ConfigSlug.default('default'),
    /** When given, committed as the first revision of the first variant. */
    data: RevisionData.optional(),
    message: CommitMessage.optional(),
  }),
  { slug: 'support-bot', family: 'application', name: 'Support bot', data: { parameters: { agent: EXAMPLE_TEMPLATE } }, message: 'First version' },
);
export type WorkflowCreate = z.input<typeof WorkflowCreate>;

export const RevisionCommit = withExample(
  z.strictObject({
    /** The variant to commit to; one that does not exist yet is created (a branch). */
    variant: ConfigSlug.default('default'),
    data: RevisionData,
    message: CommitMessage.optional(),
  }),
  { variant: 'default', data: { parameters: { agent: { ...EXAMPLE_TEMPLATE, llm: { provider: 'openai', model: 'gpt-5' } } } }, message: 'A larger model' },
);

const VariantView = z.object({
  id: z.string(),
  slug: z.string(),
  created_at: z.string(),
  /** The newest revision's version; absent while the variant has none. */
  latest_version: z.number().int().optional(),
});

export const WorkflowView = z.object({
  id: z.string(),
  slug: z.string(),
  family: WorkflowFamily,
  name: z.string().optional(),
  description: z.string().optional(),
  created_at: z.string(),
  updated_at: z.string(),
  variants: z.array(VariantView),
});
export type WorkflowView = z.infer<typeof WorkflowView>;

export const RevisionView = z.object({
  id: z.string(),
  slug: z.string(),
  version: z.number().int().describe('1 for the first revision of a variant, then 2, 3, …'),
  workflow: z.object({ id: z.string(), slug: z.string(), family: WorkflowFamily }),
  variant: z.object({ id: z.string(), slug: z.string() }),
  data: RevisionData,
  message: z.string().optional(),
  created_at: z.string(),
});
export type RevisionView = z.infer<typeof RevisionView>;

export const WorkflowCreated = z.object({ workflow: WorkflowView, revision: RevisionView.optional() });

export const WorkflowList = z.object({ count: z.number().int(), workflows: z.array(WorkflowView), next: z.string().optional() });

export const RevisionList = z.object({ count: z.number().int(), revisions: z.array(RevisionView), next: z.string().optional() });

/** `POST /api/workflows/resolve`: what invoke would run for these references. */
export const ResolveRequest = withExample(
  z.strictObject({
    references: References,
    selector: z.strictObject({ key: DeploymentKey.optional(), path: z.string().max(512).optional() }).optional(),
    flags: z.strictObject({ resolve: z.boolean().optional() }).optional(),
  }),
  { references: { application: { slug: 'support-bot' }, environment: { slug: 'production' } }, flags: { resolve: true } },
);

export const ResolvedRevision = z.object({
  revision: RevisionView,
  /** The revision's parameters, with the selector's path applied and embeds resolved when asked. */
  parameters: record,
});

/** What an environment revision deploys under one key: the workflow, its variant and revision. */
export const Deployment = z.object({
  workflow: z.object({ id: z.string(), slug: z.string() }),
  workflow_variant: z.object({ id: z.string(), slug: z.string() }),
  workflow_revision: z.object({ id: z.string(), slug: z.string(), version: z.number().int() }),
});
export type Deployment = z.infer<typeof Deployment>;

export const EnvironmentData = z.object({ references: z.record(z.string(), Deployment) });
export type EnvironmentData = z.infer<typeof EnvironmentData>;

export const EnvironmentCreate = withExample(
  z.strictObject({
    slug: ConfigSlug,
    name: z.string().min(1).max(256).optional(),
    description: z.string().max(4096).optional(),
  }),
  { slug: 'production', name: 'Production', description: 'What customers talk to' },
);
export type EnvironmentCreate = z.infer<typeof EnvironmentCreate>;

export const EnvironmentRevisionView = z.object({
  id: z.string(),
  slug: z.string(),
  version: z.number().int(),
  data: EnvironmentData,
  message: z.string().optional(),
  created_at: z.string(),
});
export type EnvironmentRevisionView = z.infer<typeof EnvironmentRevisionView>;

export const EnvironmentView = z.object({
  id: z.string(),
  slug: z.string(),
  name: z.string().optional(),
  description: z.string().optional(),
  created_at: z.string(),
  updated_at: z.string(),
  /** The newest revision: what is deployed now. Absent until the first deploy. */
  revision: EnvironmentRevisionView.optional(),
});
export type EnvironmentView = z.infer<typeof EnvironmentView>;

export const EnvironmentList = z.object({ count: z.number().int(), environments: z.array(EnvironmentView), next: z.string().optional() });

export const EnvironmentRevisionList = z.object({ count: z.number().int(), revisions: z.array(EnvironmentRevisionView), next: z.string().optional() });

export const DeployBody = withExample(
  z.strictObject({
    /** Which revision to deploy: one workflow family's references, resolved as invoke resolves them. */
    references: References.meta({
      description: 'The revision to deploy: one of the workflow, application and evaluator families (else 400), without environment keys (else 400); naming a stored revision (else 404)',
      anyOf: REFERENCE_FAMILY_KEYS.map((key) => ({ required: [key] })),
      not: { anyOf: ENVIRONMENT_KEYS.map((key) => ({ required: [key] })) },
    }),
    /** Defaults to the workflow's slug. */
    key: DeploymentKey.optional(),
    message: CommitMessage.optional(),
  }),
  { references: { application: { slug: 'support-bot' } }, message: 'Ship the first version' },
);

export const UndeployBody = withExample(z.strictObject({ key: DeploymentKey, message: CommitMessage.optional() }), { key: 'support-bot', message: 'Take the bot offline' });

/**
 * An embed: `{"@ag.embed": {"@ag.references": {...}, "@ag.selector": {"path": ...}}}` stands for
 * the value at `path` (default `parameters`) of the revision the references name. Keys beside
 * `@ag.embed` (an editor's display name) are dropped when it is resolved.
 */
export const EMBED_KEY = '@ag.embed';
export const EmbedSpec = z.strictObject({
  '@ag.references': References,
  '@ag.selector': z.strictObject({ path: z.string().min(1).max(512).optional(), key: DeploymentKey.optional() }).optional(),
});
