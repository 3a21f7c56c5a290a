import { z } from 'zod';
import { AgentEvent } from '../contract/events.ts';
import { ErrorEnvelope, ERROR_TYPES } from '../contract/errors.ts';
import { exampleOf } from '../contract/example.ts';
import { CONTRACT_VERSION } from '../contract/invoke.ts';
import { Message, UIMessage } from '../contract/messages.ts';
import { AgentTemplate } from '../contract/template.ts';
import type { DocumentedRoute } from './route-doc.ts';
import { errorResponses, routeErrorTypes } from './route-errors.ts';

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

const ENVELOPE = { $ref: '#/components/schemas/ErrorEnvelope' };

/** A parameter's example (withExample on its schema), which Swagger UI fills its field with. */
const parameterExample = (schema: z.ZodType) => {
  const example = exampleOf(schema);
  return example ? { example: example.value } : {};
};

/**
 * The request body: its schema, and the example Swagger UI's "Try it out" starts from: the route's
 * named ones, else the schema's own. A file's type with a text example is text to edit, not a file to pick.
 */
function requestBody(route: DocumentedRoute, schema: Record<string, unknown> | undefined) {
  if (route.body) {
    const own = exampleOf(route.body);
    const example = route.examples ? { examples: route.examples } : own ? { example: own.value } : {};
    return { requestBody: { required: !route.bodyOptional, content: { 'application/json': { schema, ...example } } } };
  }
  if (route.rawBody) {
    const media = (type: string) => {
      const text = route.rawExamples?.[type];
      return text === undefined ? { schema: { type: 'string', format: 'binary' } } : { schema: { type: 'string' }, example: text };
    };
    return { requestBody: { required: !route.bodyOptional, content: Object.fromEntries(route.rawBody.map((type) => [type, media(type)])) } };
  }
  return {};
}

function operation(route: DocumentedRoute) {
  const body = route.body ? jsonSchema(route.body, 'input') : undefined;
  const parameters = [
    route.path.startsWith('/api/')
      ? { name: 'project_id', in: 'query', required: false, schema: { type: 'string' }, description: "The project to act in; absent, the API key's own project" }
      : { name: 'project_id', in: 'query', required: true, schema: { type: 'string' }, description: 'The project to act in' },
    ...route.params.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
    ...Object.entries(route.query ?? {}).map(([name, query]) => ({ name, in: 'query', required: query.required ?? false, schema: jsonSchema(query.schema, 'input'), description: query.description, ...parameterExample(query.schema) })),
    ...Object.entries(route.headers ?? {}).map(([name, header]) => ({ name, in: 'header', required: false, schema: jsonSchema(header.schema, 'input'), description: header.description })),
  ];
  return {
    tags: [TAGS[tagOf(route.path)]![1]],
    summary: route.summary,
    description: `Needs an API key with the "${route.role}" role or higher.`,
    security: [{ apiKey: [] }],
    parameters,
    ...requestBody(route, body),
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
      ...errorResponses(routeErrorTypes(route, body), ENVELOPE),
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
