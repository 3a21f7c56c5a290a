import { z } from 'zod';
import { PendingInteraction, StopReason, Usage } from '../contract/events.ts';
import type { InspectRequest, InspectResponse } from '../contract/inspect.ts';
import { CONTRACT_VERSION } from '../contract/invoke.ts';
import { Message } from '../contract/messages.ts';
import { AgentTemplate } from '../contract/template.ts';
import { AppError } from '../errors.ts';
import { defaultTemplate, parseTemplate } from './template.ts';

/** The built-in agent workflow's URI, as the reference names it so its clients recognise it. */
export const AGENT_WORKFLOW_URI = 'agenta:builtin:agent:v0';

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

/**
 * Describes what an invoke would run: with no references, the built-in agent workflow with its
 * default template (or the inline revision's); and a request that, posted as is to invoke, runs.
 */
export function inspectAgentWorkflow(request: InspectRequest, defaultLlm: { provider: string; model: string }): InspectResponse {
  if (request.references && Object.values(request.references).some((r) => r != null)) {
    throw new AppError('not-implemented', 'inspecting a stored configuration by reference is not available yet; send the template as data.parameters.agent');
  }
  const inline = (request.revision?.data as { parameters?: { agent?: unknown } } | undefined)?.parameters?.agent;
  const agent = inline === undefined ? defaultTemplate(defaultLlm) : parseTemplate(inline, defaultLlm);
  const parameters = { agent };
  const response: InspectResponse = {
    version: CONTRACT_VERSION,
    revision: {
      slug: 'agent',
      version: 'v0',
      name: 'Agent',
      description: 'One agent turn per request: reads the conversation, calls the model, runs tools in the session folder.',
      data: { uri: AGENT_WORKFLOW_URI, schemas: workflowSchemas(parameters), parameters },
    },
    request: {
      version: CONTRACT_VERSION,
      ...(request.session_id ? { session_id: request.session_id } : {}),
      data: { inputs: { messages: [{ role: 'user', content: 'Hello!' }] }, parameters },
    },
  };
  if (request.session_id) response.session_id = request.session_id;
  if (request.flags) response.flags = request.flags;
  if (request.tags) response.tags = request.tags;
  if (request.meta) response.meta = request.meta;
  return response;
}
