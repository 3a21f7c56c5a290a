import { z } from 'zod';
import { AgentEvent } from '../contract/events.ts';
import { ErrorEnvelope, ERROR_TYPES } from '../contract/errors.ts';
import { CONTRACT_VERSION } from '../contract/invoke.ts';
import { Message, UIMessage } from '../contract/messages.ts';
import { AgentTemplate } from '../contract/template.ts';
import type { DocumentedRoute } from './route-doc.ts';

/**
 * The OpenAPI 3.1 document, generated from the routes the server registered, each with the doc it
 * was registered with (route-doc.ts): a route's body here is the schema its handler parses with,
 * so the two cannot disagree.
 */

const jsonSchema = (schema: z.ZodType, io: 'input' | 'output') => {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
};

/** Operations grouped by what they act on (a path's tag is the first whose prefix it starts with), in the order the docs show them. */
const TAGS: Array<[prefix: string, tag: string]> = [
  ['/services/', 'Invoke'],
  ['/api/sessions/interactions', 'Interactions'],
  ['/api/sessions', 'Sessions'],
  ['/api/connections', 'Connections'],
  ['/api/keys', 'API keys'],
  ['/api/workflows', 'Workflows'],
  ['/api/environments', 'Environments'],
  ['/api/simple/testsets', 'Test sets'],
  ['/api/', 'Evaluations'],
];

const tagOf = (path: string) => TAGS.findIndex(([prefix]) => path.startsWith(prefix));

function operation(route: DocumentedRoute) {
  const parameters = [
    route.path.startsWith('/api/')
      ? { name: 'project_id', in: 'query', required: false, schema: { type: 'string' }, description: "The project to act in; absent, the API key's own project" }
      : { name: 'project_id', in: 'query', required: true, schema: { type: 'string' }, description: 'The project to act in' },
    ...route.params.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
    ...Object.entries(route.query ?? {}).map(([name, query]) => ({ name, in: 'query', required: query.required ?? false, schema: jsonSchema(query.schema, 'input'), description: query.description })),
    ...Object.entries(route.headers ?? {}).map(([name, header]) => ({ name, in: 'header', required: false, schema: jsonSchema(header.schema, 'input'), description: header.description })),
  ];
  const errors = { description: 'An error, in the envelope; status.type names it', content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } } };
  return {
    tags: [TAGS[tagOf(route.path)]![1]],
    summary: route.summary,
    description: `Needs an API key with the "${route.role}" role or higher.`,
    security: [{ apiKey: [] }],
    parameters,
    ...(route.body ? { requestBody: { required: !route.bodyOptional, content: { 'application/json': { schema: jsonSchema(route.body, 'input'), ...(route.examples ? { examples: route.examples } : {}) } } } } : {}),
    ...(route.rawBody ? { requestBody: { required: !route.bodyOptional, content: Object.fromEntries(route.rawBody.map((type) => [type, { schema: { type: 'string', format: 'binary' } }])) } } : {}),
    responses: {
      [String(route.ok.status)]: {
        description: route.ok.description,
        ...(route.ok.schema
          ? {
              content: {
                'application/json': { schema: jsonSchema(route.ok.schema, 'output') },
                ...Object.fromEntries(Object.entries(route.streams ?? {}).map(([type, stream]) => [type, { schema: { type: 'string', description: stream.description }, example: stream.example }])),
              },
            }
          : {}),
        ...(route.ok.content ? { content: { [route.ok.content]: { schema: { type: 'string' } } } } : {}),
      },
      '4XX': errors,
      '5XX': errors,
    },
  };
}

/** The document of the given routes (documentedRoutes collects an app's), grouped by tag, each group in the order its routes were registered. */
export function openApiDocument(version: string, routes: readonly DocumentedRoute[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  const ordered = [...routes].sort((a, b) => tagOf(a.path) - tagOf(b.path));
  for (const route of ordered) (paths[route.path] ??= {})[route.method] = operation(route);
  return {
    openapi: '3.1.0',
    info: {
      title: 'agentd',
      version,
      description: `Runs an LLM agent for one conversation turn per request. Contract version ${CONTRACT_VERSION}. Error types: ${Object.keys(ERROR_TYPES).join(', ')}.`,
    },
    paths,
    components: {
      securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'ApiKey <key>' } },
      schemas: {
        ErrorEnvelope: jsonSchema(ErrorEnvelope, 'output'),
        AgentTemplate: jsonSchema(AgentTemplate, 'input'),
        Message: jsonSchema(Message, 'input'),
        UIMessage: jsonSchema(UIMessage, 'input'),
        AgentEvent: jsonSchema(AgentEvent, 'output'),
      },
    },
  };
}
