import { z } from 'zod';
import { PendingInteraction, RanRevision, StopReason, Usage } from './events.ts';
import { AgentTemplate } from './template.ts';
import { ErrorEnvelope } from './errors.ts';
import { InboundMessage, UIMessage } from './messages.ts';
import { SESSION_ID_PATTERN } from './session-id.ts';

/** Invoke request and response (spec §2.1, §2.2, §2.4, §2.6). */

export const CONTRACT_VERSIONS = ['2025.07.14'] as const;
export const CONTRACT_VERSION = CONTRACT_VERSIONS[0];

export { SESSION_ID_PATTERN };
export const SessionId = z
  .string()
  .regex(SESSION_ID_PATTERN, 'a session id is 1-128 letters, digits, ".", "_", ":" or "-"');

export const Reference = z.looseObject({
  id: z.string().min(1).nullish(),
  slug: z.string().min(1).nullish(),
  version: z.union([z.string(), z.number()]).nullish(),
});
export type Reference = z.infer<typeof Reference>;

export const REFERENCE_FAMILIES = {
  workflow: ['workflow', 'workflow_variant', 'workflow_revision'],
  application: ['application', 'application_variant', 'application_revision'],
  evaluator: ['evaluator', 'evaluator_variant', 'evaluator_revision'],
  environment: ['environment', 'environment_variant', 'environment_revision'],
} as const;

/**
 * The run's stored configuration. Spec §2.4: at most one of the workflow, application and evaluator
 * families (a 400 otherwise), optionally with an environment; each names something stored (a 404 otherwise).
 */
export const References = z.strictObject(
  Object.fromEntries(
    Object.values(REFERENCE_FAMILIES)
      .flat()
      .map((key) => [key, Reference.nullish()]),
  ) as Record<(typeof REFERENCE_FAMILIES)[keyof typeof REFERENCE_FAMILIES][number], z.ZodOptional<z.ZodNullable<typeof Reference>>>,
).meta({
  description:
    'At most one of the workflow, application and evaluator families (else 400), with or without the environment keys; each reference must name a stored workflow, variant, revision or environment (else 404)',
});
export type References = z.infer<typeof References>;

const Flags = z.looseObject({
  stream: z.boolean().nullish(),
  trim: z.boolean().nullish(),
  force: z.boolean().nullish(),
  resolve: z.boolean().nullish(),
});

const record = z.record(z.string(), z.unknown());

const Link = z.looseObject({ trace_id: z.string(), span_id: z.string() });

const jsonSchemaOf = (schema: z.ZodType) => {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
};

/**
 * `messages` is checked against the native or the Vercel message schema once the format is known
 * (x-ag-messages-format); the document names both, so a client knows what an element is.
 */
const InputMessages = z.array(z.unknown()).meta({
  items: { anyOf: [...(jsonSchemaOf(InboundMessage).anyOf as unknown[]), jsonSchemaOf(UIMessage)] },
  description:
    'The conversation: native messages, or UIMessages with x-ag-messages-format: vercel. At least one that is not a system message (else 400), unless data.testcase supplies them or x-ag-session-control: force attaches to the live turn. A tool result names its call by tool_call_id, after it (else 400)',
});

const InvokeData = z.looseObject({
  inputs: z.looseObject({ messages: InputMessages.nullish() }).nullish(),
  parameters: z.looseObject({ agent: AgentTemplate.nullish() }).nullish(),
  revision: record.nullish(),
  testcase: z.looseObject({ id: z.string().nullish(), data: record.nullish() }).nullish(),
  trace: record.nullish(),
  outputs: z.unknown().optional(),
});

/** Checked after parsing (checkVersion), where a wrong one gets its own error type; the document names the ones it takes. */
const Version = z.string().meta({ enum: [...CONTRACT_VERSIONS], description: 'The request contract version; absent means the newest' });

export const InvokeRequest = z.looseObject({
  version: Version.nullish(),
  session_id: SessionId.nullish(),
  data: InvokeData.nullish(),
  references: References.nullish(),
  selector: z.looseObject({ key: z.string().nullish(), path: z.string().nullish() }).nullish(),
  flags: Flags.nullish(),
  tags: record.nullish(),
  meta: record.nullish(),
  links: z.record(z.string(), Link).nullish(),
  secrets: z.record(z.string(), z.string()).nullish(),
  credentials: z.string().nullish(),
});
export type InvokeRequest = z.infer<typeof InvokeRequest>;

const TurnOutputs = z.object({
  messages: z.array(z.unknown()),
  stop_reason: StopReason.optional(),
  pending_interaction: PendingInteraction.optional(),
  usage: Usage.optional(),
});

/** A run's reply: the error envelope's fields, plus the turn and its outputs on success. */
export const InvokeResponse = ErrorEnvelope.extend({
  turn_id: z.string().optional(),
  revision: RanRevision.optional(),
  data: z.object({ outputs: TurnOutputs }).optional(),
});
export type InvokeResponse = z.infer<typeof InvokeResponse>;
