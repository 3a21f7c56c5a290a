import { z } from 'zod';
import { PendingInteraction, StopReason, Usage } from '../contract/events.ts';
import type { InspectRequest, InspectResponse } from '../contract/inspect.ts';
import { CONTRACT_VERSION } from '../contract/invoke.ts';
import { AGENT_WORKFLOW_URI } from '../contract/configs.ts';
import { Message } from '../contract/messages.ts';
import { AgentTemplate } from '../contract/template.ts';
import { defaultTemplate, parseTemplate } from './template.ts';


const schemaOf = (schema: z.ZodType, io: 'input' | 'output') => {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
};

/**
 * The agent workflow's declared inputs, parameters and outputs as JSON Schema, generated from the
 * zod schemas invoke validates with. `inputs` declares `messages` only: it is all a test case can
 * give the agent (spec §4.5.2).
 */
function workflowSchemas(parameters: Record<string, unknown>) {
  const inputs = z.object({ messages: z.array(Message).meta({ 'x-ag-type-ref': 'messages' }) });
  const outputs = z.object({
    messages: z.array(Message).meta({ 'x-ag-type-ref': 'messages' }),
    stop_reason: StopReason.optional(),
    pending_interaction: PendingInteraction.optional(),
    usage: Usage.optional(),
  });
  const params = z.object({ agent: AgentTemplate.meta({ 'x-ag-type-ref': 'agent-template', default: parameters.agent }) });
  return { inputs: schemaOf(inputs, 'input'), parameters: schemaOf(params, 'input'), outputs: schemaOf(outputs, 'output') };
}

/** What inspect describes: a configuration as resolved from the request (configs/run-config.ts). */
export interface InspectedConfig {
  agent: unknown;
  /** Where the template is in the request, for its errors. */
  agentAt?: string;
  revision?: { id: string; slug: string; version: number; artifact: { slug: string; name: string | null; description: string | null } };
  embedded: boolean;
}

/**
 * Describes what an invoke would run, and a request that, posted as is to invoke, runs it: a stored
 * revision by the request's references (the ready-made request names them too, so it runs what
 * they name when it is posted), else the built-in agent workflow with its default template or the
 * inline revision's.
 */
export function inspectAgentWorkflow(request: InspectRequest, defaultLlm: { provider: string; model: string }, config: InspectedConfig): InspectResponse {
  const agent = config.agent === undefined ? defaultTemplate(defaultLlm) : parseTemplate(config.agent, defaultLlm, config.agentAt);
  const parameters = { agent };
  const stored = config.revision;
  const sample = { inputs: { messages: [{ role: 'user', content: 'Hello!' }] } };
  const response: InspectResponse = {
    version: CONTRACT_VERSION,
    revision: stored
      ? {
          id: stored.id,
          slug: stored.slug,
          version: stored.version,
          name: stored.artifact.name ?? stored.artifact.slug,
          ...(stored.artifact.description ? { description: stored.artifact.description } : {}),
          data: { uri: AGENT_WORKFLOW_URI, schemas: workflowSchemas(parameters), parameters },
        }
      : {
          // The built-in workflow has no stored row; its URI names it wherever a revision id goes.
          ...(config.agent === undefined ? { id: AGENT_WORKFLOW_URI } : {}),
          slug: 'agent',
          // A number, as every revision's: the built-in workflow is version 0 (its URI says v0).
          version: 0,
          name: 'Agent',
          description: 'One agent turn per request: reads the conversation, calls the model, runs tools in the session folder.',
          data: { uri: AGENT_WORKFLOW_URI, schemas: workflowSchemas(parameters), parameters },
        },
    request: {
      version: CONTRACT_VERSION,
      ...(request.session_id ? { session_id: request.session_id } : {}),
      ...(stored
        ? {
            references: request.references,
            ...(request.selector ? { selector: request.selector } : {}),
            ...(config.embedded ? { flags: { resolve: true } } : {}),
            data: sample,
          }
        : { data: { ...sample, parameters } }),
    },
  };
  if (request.session_id) response.session_id = request.session_id;
  if (request.flags) response.flags = request.flags;
  if (request.tags) response.tags = request.tags;
  if (request.meta) response.meta = request.meta;
  return response;
}
