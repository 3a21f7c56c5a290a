import { z } from 'zod';
import { AgentEvent } from '../contract/events.ts';
import { ErrorEnvelope, ERROR_TYPES } from '../contract/errors.ts';
import { ConnectionCreate, ConnectionList, ConnectionView } from '../contract/connections.ts';
import { InteractionList, InteractionQuery, InteractionReply, Paging, RespondBody, TransitionBody, WindowedInteractionQuery } from '../contract/interactions.ts';
import { CONTRACT_VERSION, InvokeRequest, InvokeResponse, SessionId } from '../contract/invoke.ts';
import { Message, UIMessage } from '../contract/messages.ts';
import { FileListing, FileUploaded, SessionList, SessionListStatus, SessionStopped, SessionView } from '../contract/sessions.ts';
import { KeyCreate, KeyCreated, KeyList, KeySelf } from '../contract/keys.ts';
import { AgentTemplate } from '../contract/template.ts';
import { InspectRequest, InspectResponse } from '../contract/inspect.ts';
import {
  DeployBody,
  EnvironmentCreate,
  EnvironmentList,
  EnvironmentRevisionList,
  EnvironmentView,
  ResolvedRevision,
  ResolveRequest,
  RevisionCommit,
  RevisionList,
  RevisionView,
  UndeployBody,
  WorkflowCreate,
  WorkflowCreated,
  WorkflowFamily,
  WorkflowList,
  WorkflowView,
} from '../contract/configs.ts';
import {
  EvaluationCreate,
  EvaluationList,
  EvaluationReply,
  MetricsList,
  MetricsQuery,
  ResultList,
  ResultsQuery,
  TestsetCreate,
  TestsetEdit,
  TestsetList,
  TestsetQuery,
  TestsetReply,
  RunReply,
} from '../contract/evaluations.ts';
import { IdOrSlug } from './routes/configs.ts';
import { IMPORT_TYPES, ImportQuery } from './routes/evaluations.ts';
import { SessionIdPrefix } from './session-request.ts';

/**
 * The OpenAPI 3.1 document, generated from the same zod schemas that validate requests: a route's
 * body here is the schema its handler parses with, so the two cannot disagree.
 */

type Schema = z.ZodType;

interface Route {
  method: 'get' | 'post' | 'put' | 'delete';
  path: string;
  summary: string;
  role: 'viewer' | 'editor' | 'admin';
  body?: Schema;
  /** The route takes a bodiless request too (its `optionalBody`). */
  bodyOptional?: true;
  /** Content types of a body that is a file, not JSON. */
  rawBody?: string[];
  ok: { status: number; schema?: Schema; description: string; content?: string };
  params?: string[];
  query?: Record<string, Parameter>;
  /** Request headers the route reads (spec §4.1). */
  headers?: Record<string, Parameter>;
  /** Named request bodies a reader can copy. */
  examples?: Record<string, { summary: string; value: unknown }>;
  /** The reply's other content types (streams), each with what it carries and a sample. */
  streams?: Record<string, { description: string; example: string }>;
}

/** A query or header parameter: the schema its route reads it with (values arrive as text, numbers as digits). */
interface Parameter {
  description: string;
  schema: Schema;
  required?: true;
}

const param = (description: string, schema: Schema = z.string(), required?: true): Parameter => ({ description, schema, ...(required ? { required } : {}) });

/** `limit` and `cursor`, as pageQuery (session-request.ts) reads them. */
const page = (what: string): Record<string, Parameter> => ({
  limit: param(`${what} per page, 1-200 (default 20)`, Paging.limit),
  cursor: param('The next value of the previous page', Paging.cursor),
});

const EMBEDS_HEADER = { 'x-ag-workflow-embeds': param('resolve: resolve @ag.embed references in the configuration (flags.resolve wins)', z.enum(['resolve'])) };

/** Spec §4.1: what the invoke request's headers do; a body's `flags` win over them. */
const INVOKE_HEADERS: Record<string, Parameter> = {
  'x-ag-messages-format': param('vercel: messages and frames in the Vercel AI SDK representation; absent (or native): the native one', z.enum(['vercel', 'native'])),
  'x-ag-messages-transcript': param('last: only the trailing unit of the turn (flags.trim); full: every message', z.enum(['last', 'full'])),
  'x-ag-session-control': param('force: take over the session\'s live turn, or attach to it when the body has no input (flags.force)', z.enum(['force'])),
  ...EMBEDS_HEADER,
  'x-ag-session-id': param('The session, when the body has no session_id', SessionId),
};

const INVOKE_EXAMPLES: Route['examples'] = {
  native: {
    summary: 'A turn with an inline template (native messages)',
    value: {
      session_id: 'chat-42',
      data: {
        inputs: { messages: [{ role: 'user', content: 'Write a haiku into haiku.txt' }] },
        parameters: { agent: { llm: { provider: 'openai', model: 'gpt-5-mini' }, tools: [{ type: 'builtin', name: 'write' }], runner: { permissions: { default: 'ask' } } } },
      },
    },
  },
  approval: {
    summary: 'Answering a pause in band: the paused tool-call message carries the decision',
    value: {
      session_id: 'chat-42',
      data: {
        inputs: {
          messages: [
            { role: 'user', content: 'Write a haiku into haiku.txt' },
            { role: 'tool', content: '', tool_call_id: 'call_1', tool_name: 'write', input: { path: 'haiku.txt', content: '…' }, approval: { id: '<interaction id>', approved: true } },
          ],
        },
      },
    },
  },
  references: {
    summary: 'Running what an environment deploys',
    value: { references: { application: { slug: 'support-bot' }, environment: { slug: 'production' } }, data: { inputs: { messages: [{ role: 'user', content: 'Hello' }] } } },
  },
  useChat: {
    summary: "The body useChat's DefaultChatTransport sends (with x-ag-messages-format: vercel)",
    value: { id: 'chat-42', trigger: 'submit-message', messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'Hello' }] }] },
  },
};

const INVOKE_STREAMS: Route['streams'] = {
  'text/event-stream': {
    description:
      'With Accept: text/event-stream (or flags.stream): one SSE `data:` line per native event (AgentEvent: turn_start, message_start/delta/end, thought_*, tool_call, tool_result, interaction_request, usage, error, and exactly one final done), no terminator. With x-ag-messages-format: vercel it is the AI SDK UI message stream instead, ending with `data: [DONE]`, and the reply carries x-vercel-ai-ui-message-stream: v1.',
    example:
      'data: {"type":"turn_start","data":{"turn_id":"…","session_id":"chat-42","trace_id":"…"}}\n\ndata: {"type":"message_delta","data":{"id":"m1","delta":"Hello"}}\n\ndata: {"type":"done","data":{"stop_reason":"end_turn","stopReason":"end_turn"}}\n\n',
  },
  'application/x-ndjson': {
    description: 'With Accept: application/x-ndjson or application/jsonl: the same native events, one JSON object per line.',
    example: '{"type":"turn_start","data":{"turn_id":"…","session_id":"chat-42","trace_id":"…"}}\n{"type":"done","data":{"stop_reason":"end_turn","stopReason":"end_turn"}}\n',
  },
};

const ROUTES: Route[] = [
  {
    method: 'post',
    path: '/services/agent/v0/invoke',
    summary: 'Run one agent turn (JSON, SSE, NDJSON or the Vercel UI message stream, by Accept and flags)',
    role: 'editor',
    body: InvokeRequest,
    headers: INVOKE_HEADERS,
    examples: INVOKE_EXAMPLES,
    streams: INVOKE_STREAMS,
    ok: { status: 200, schema: InvokeResponse, description: 'The turn: one JSON reply, or a stream (below) with a streaming Accept. A failure before the first frame is the JSON error envelope with its real status, whatever was asked for.' },
  },
  {
    method: 'get',
    path: '/services/agent/v0/invoke/{session_id}/stream',
    summary: "The session's live turn from its start, as the Vercel UI message stream: what useChat's resume asks for after a reload",
    role: 'viewer',
    params: ['session_id'],
    ok: { status: 200, description: 'The Vercel UI message stream of the live turn; 204 when the session runs none', content: 'text/event-stream' },
  },
  {
    method: 'post',
    path: '/services/agent/v0/inspect',
    summary: 'The resolved agent workflow revision (schemas, default template) and a ready-made invoke request',
    role: 'viewer',
    body: InspectRequest,
    bodyOptional: true,
    headers: EMBEDS_HEADER,
    ok: { status: 200, schema: InspectResponse, description: 'The revision and a request that runs as is' },
  },
  {
    method: 'post',
    path: '/api/sessions/interactions/query',
    summary: 'List interactions',
    role: 'viewer',
    body: z.union([InteractionQuery, WindowedInteractionQuery]),
    bodyOptional: true,
    ok: { status: 200, schema: InteractionList, description: 'One page of interactions, oldest first' },
  },
  {
    method: 'get',
    path: '/api/sessions/interactions/{interaction_id}',
    summary: 'Read one interaction',
    role: 'viewer',
    params: ['interaction_id'],
    ok: { status: 200, schema: InteractionReply, description: 'The interaction' },
  },
  {
    method: 'post',
    path: '/api/sessions/interactions/{interaction_id}/respond',
    summary: 'Answer a pending interaction; the paused turn then continues by itself',
    role: 'editor',
    params: ['interaction_id'],
    body: RespondBody,
    ok: { status: 200, schema: InteractionReply, description: 'The interaction, now responded' },
  },
  {
    method: 'post',
    path: '/api/sessions/interactions/transition',
    summary: 'Move an interaction to resolved or cancelled',
    role: 'editor',
    body: TransitionBody,
    ok: { status: 200, schema: InteractionReply, description: 'The interaction after the move' },
  },
  {
    method: 'get',
    path: '/api/sessions',
    summary: "The project's sessions, newest first (paged), with each one's live turn, pending interactions and latest turn",
    role: 'viewer',
    query: {
      ...page('Sessions'),
      id_prefix: param('Only sessions whose id starts with this', SessionIdPrefix),
      status: param('pending: only sessions with an interaction waiting for an answer; live: only sessions running a turn', SessionListStatus),
    },
    ok: { status: 200, schema: SessionList, description: 'One page of sessions' },
  },
  {
    method: 'get',
    path: '/api/sessions/{session_id}',
    summary: 'Read a session, its live turn and its turns (newest first, paged)',
    role: 'viewer',
    params: ['session_id'],
    query: page('Turns'),
    ok: { status: 200, schema: SessionView, description: 'The session' },
  },
  {
    method: 'post',
    path: '/api/sessions/{session_id}/stop',
    summary: "Stop the session's live turn: it ends cancelled, and its pending interactions with it",
    role: 'editor',
    params: ['session_id'],
    ok: { status: 200, schema: SessionStopped, description: 'The turn stopped (or, on another replica, asked to stop at its next lease renewal); 404 when none runs' },
  },
  {
    method: 'delete',
    path: '/api/sessions/{session_id}',
    summary: 'Delete a session: its folder and every record',
    role: 'editor',
    params: ['session_id'],
    ok: { status: 204, description: 'Deleted' },
  },
  {
    method: 'get',
    path: '/api/sessions/{session_id}/files',
    summary: "List a folder of the session's working folder, or download a file",
    role: 'viewer',
    params: ['session_id'],
    query: { path: param('Relative to the session folder (default ".")') },
    ok: { status: 200, schema: FileListing, description: 'A folder listing (JSON) or the file (application/octet-stream)' },
  },
  {
    method: 'put',
    path: '/api/sessions/{session_id}/files',
    summary: 'Upload a file into the session folder',
    role: 'editor',
    params: ['session_id'],
    query: { path: param('Where to write it, relative to the session folder', z.string().min(1), true) },
    rawBody: ['application/octet-stream'],
    // No body writes an empty file.
    bodyOptional: true,
    ok: { status: 201, schema: FileUploaded, description: 'Written' },
  },
  {
    method: 'post',
    path: '/api/connections',
    summary: 'Store a project connection: a provider, its base URL and API key (encrypted at rest, never returned), for llm.connection {mode: "project", slug}',
    role: 'admin',
    body: ConnectionCreate,
    ok: { status: 201, schema: ConnectionView, description: 'The connection, without its key' },
  },
  {
    method: 'get',
    path: '/api/connections',
    summary: "List the project's connections, by slug",
    role: 'viewer',
    ok: { status: 200, schema: ConnectionList, description: 'Every connection of the project, without keys' },
  },
  {
    method: 'get',
    path: '/api/connections/{slug}',
    summary: 'Read one connection',
    role: 'viewer',
    params: ['slug'],
    ok: { status: 200, schema: ConnectionView, description: 'The connection, without its key' },
  },
  {
    method: 'delete',
    path: '/api/connections/{slug}',
    summary: 'Delete a connection; templates naming it get 404 from then on',
    role: 'admin',
    params: ['slug'],
    ok: { status: 204, description: 'Deleted' },
  },
  {
    method: 'get',
    path: '/api/keys/self',
    summary: 'The calling API key and its project',
    role: 'viewer',
    ok: { status: 200, schema: KeySelf, description: 'The key (never its secret) and its project' },
  },
  {
    method: 'get',
    path: '/api/keys',
    summary: "The project's API keys, revoked ones included",
    role: 'admin',
    ok: { status: 200, schema: KeyList, description: 'Every key of the project, oldest first' },
  },
  {
    method: 'post',
    path: '/api/keys',
    summary: 'Create an API key of the project; its secret is in this reply only',
    role: 'admin',
    body: KeyCreate,
    bodyOptional: true,
    ok: { status: 201, schema: KeyCreated, description: 'The new key, with its secret in `key`' },
  },
  {
    method: 'delete',
    path: '/api/keys/{key_id}',
    summary: 'Revoke an API key',
    role: 'admin',
    params: ['key_id'],
    ok: { status: 204, description: 'Revoked' },
  },
  {
    method: 'post',
    path: '/api/workflows',
    summary: 'Create a workflow (family workflow, application or evaluator) with its first variant and, when data is given, its first revision',
    role: 'editor',
    body: WorkflowCreate,
    ok: { status: 201, schema: WorkflowCreated, description: 'The workflow, and its first revision when data was given' },
  },
  {
    method: 'get',
    path: '/api/workflows',
    summary: "List the project's workflows, by slug",
    role: 'viewer',
    query: { family: param('Only this family', WorkflowFamily) },
    ok: { status: 200, schema: WorkflowList, description: 'The workflows with their variants' },
  },
  {
    method: 'post',
    path: '/api/workflows/resolve',
    summary: 'The revision some references name, and its parameters as invoke would run them (x-ag-workflow-embeds: resolve, or flags.resolve, resolves embeds)',
    role: 'viewer',
    body: ResolveRequest,
    headers: EMBEDS_HEADER,
    ok: { status: 200, schema: ResolvedRevision, description: 'The revision and its parameters' },
  },
  {
    method: 'get',
    path: '/api/workflows/{workflow}',
    summary: 'Read a workflow, by id or slug, with its variants',
    role: 'viewer',
    params: ['workflow'],
    ok: { status: 200, schema: WorkflowView, description: 'The workflow' },
  },
  {
    method: 'post',
    path: '/api/workflows/{workflow}/revisions',
    summary: "Commit a variant's next revision (a variant that does not exist yet is created); the template is checked as invoke checks it",
    role: 'editor',
    params: ['workflow'],
    body: RevisionCommit,
    ok: { status: 201, schema: RevisionView, description: 'The new revision' },
  },
  {
    method: 'get',
    path: '/api/workflows/{workflow}/revisions',
    summary: "List a workflow's revisions, newest first",
    role: 'viewer',
    params: ['workflow'],
    query: { variant: param('Only this variant (id or slug)', IdOrSlug), ...page('Revisions') },
    ok: { status: 200, schema: RevisionList, description: 'One page of revisions' },
  },
  {
    method: 'post',
    path: '/api/environments',
    summary: 'Create an environment (e.g. development, production)',
    role: 'editor',
    body: EnvironmentCreate,
    ok: { status: 201, schema: EnvironmentView, description: 'The environment, deploying nothing yet' },
  },
  {
    method: 'get',
    path: '/api/environments',
    summary: "List the project's environments with what each deploys",
    role: 'viewer',
    ok: { status: 200, schema: EnvironmentList, description: 'The environments' },
  },
  {
    method: 'get',
    path: '/api/environments/{environment}',
    summary: 'Read an environment, by id or slug, with what it deploys now',
    role: 'viewer',
    params: ['environment'],
    ok: { status: 200, schema: EnvironmentView, description: 'The environment and its newest revision' },
  },
  {
    method: 'get',
    path: '/api/environments/{environment}/revisions',
    summary: "List an environment's revisions (its deploy history), newest first",
    role: 'viewer',
    params: ['environment'],
    query: page('Revisions'),
    ok: { status: 200, schema: EnvironmentRevisionList, description: 'One page of environment revisions' },
  },
  {
    method: 'post',
    path: '/api/environments/{environment}/deploy',
    summary: "Deploy a workflow revision under a key (default: the workflow's slug): commits the environment's next revision",
    role: 'editor',
    params: ['environment'],
    body: DeployBody,
    ok: { status: 200, schema: EnvironmentView, description: 'The environment with its new revision' },
  },
  {
    method: 'post',
    path: '/api/environments/{environment}/undeploy',
    summary: "Remove a key from what an environment deploys: commits the environment's next revision",
    role: 'editor',
    params: ['environment'],
    body: UndeployBody,
    ok: { status: 200, schema: EnvironmentView, description: 'The environment with its new revision' },
  },
  {
    method: 'post',
    path: '/api/simple/testsets/',
    summary: 'Create a test set and its rows in one call; the reply carries revision_id',
    role: 'editor',
    body: TestsetCreate,
    ok: { status: 200, schema: TestsetReply, description: 'The test set, its first revision and its rows with their ids' },
  },
  {
    method: 'post',
    path: '/api/simple/testsets/import',
    summary: 'Create a test set from a CSV or JSONL file (or commit it as a new revision of ?testset=); a messages column holds a JSON array of messages, else the input/question column (or ?input=) becomes one user message',
    role: 'editor',
    rawBody: [...IMPORT_TYPES],
    query: {
      format: param('csv or jsonl (else from Content-Type)', ImportQuery.shape.format),
      slug: param("The new test set's slug", ImportQuery.shape.slug),
      name: param('Its name', ImportQuery.shape.name),
      input: param('The text column to turn into the user message', ImportQuery.shape.input),
      testset: param('Commit to this test set (id or slug) instead', ImportQuery.shape.testset),
      delimiter: param("A CSV file's column separator (tab for a tab); absent, the one its header line uses", ImportQuery.shape.delimiter),
    },
    ok: { status: 200, schema: TestsetReply, description: 'The test set' },
  },
  {
    method: 'get',
    path: '/api/simple/testsets/',
    summary: "List the project's test sets (row ids, without the rows)",
    role: 'viewer',
    ok: { status: 200, schema: TestsetList, description: 'The test sets' },
  },
  {
    method: 'post',
    path: '/api/simple/testsets/query',
    summary: "List test sets by the reference's query: attributes, names, a limit",
    role: 'viewer',
    body: TestsetQuery,
    bodyOptional: true,
    ok: { status: 200, schema: TestsetList, description: 'The test sets that match' },
  },
  {
    method: 'get',
    path: '/api/simple/testsets/{testset_id}',
    summary: 'Read a test set (id or slug): its newest revision and rows',
    role: 'viewer',
    params: ['testset_id'],
    ok: { status: 200, schema: TestsetReply, description: 'The test set' },
  },
  {
    method: 'put',
    path: '/api/simple/testsets/{testset_id}',
    summary: 'Commit a new revision of a test set with the rows as they now are (rows sent with their id keep it)',
    role: 'editor',
    params: ['testset_id'],
    body: TestsetEdit,
    ok: { status: 200, schema: TestsetReply, description: 'The test set at its new revision' },
  },
  {
    method: 'post',
    path: '/api/simple/evaluations/',
    summary: 'Create an evaluation run and start it: one application revision over one test set revision, repeats, concurrency, evaluators',
    role: 'editor',
    body: EvaluationCreate,
    ok: { status: 200, schema: EvaluationReply, description: 'The run; its status is at data.status' },
  },
  {
    method: 'get',
    path: '/api/simple/evaluations/',
    summary: "List the project's evaluation runs, newest first",
    role: 'viewer',
    query: page('Runs'),
    ok: { status: 200, schema: EvaluationList, description: 'One page of runs' },
  },
  {
    method: 'get',
    path: '/api/simple/evaluations/{evaluation_id}',
    summary: 'Read a run: data.status and data.progress',
    role: 'viewer',
    params: ['evaluation_id'],
    ok: { status: 200, schema: EvaluationReply, description: 'The run' },
  },
  {
    method: 'get',
    path: '/api/evaluations/runs/{run_id}',
    summary: "Read an evaluation run as the reference's SDK does, its status at run.status",
    role: 'viewer',
    params: ['run_id'],
    ok: { status: 200, schema: RunReply, description: 'The run' },
  },
  {
    method: 'post',
    path: '/api/simple/evaluations/{evaluation_id}/stop',
    summary: 'Stop a running run: cases in flight are cancelled, the rest never start; the run ends cancelled (a run that already ended stays as it is)',
    role: 'editor',
    params: ['evaluation_id'],
    ok: { status: 200, schema: EvaluationReply, description: 'The run: cancelled, or as it ended' },
  },
  {
    method: 'post',
    path: '/api/simple/evaluations/{evaluation_id}/rerun-failed',
    summary: 'Run the failed and cancelled cases of an ended run again (fresh retry budget) and merge their results; resumes a stopped run',
    role: 'editor',
    params: ['evaluation_id'],
    ok: { status: 200, schema: EvaluationReply, description: 'The run, running again' },
  },
  {
    method: 'post',
    path: '/api/evaluations/results/query',
    summary: 'Per-case results: status, outputs, error, duration, tokens, cost, scores, trace id and every attempt',
    role: 'viewer',
    body: ResultsQuery,
    bodyOptional: true,
    ok: { status: 200, schema: ResultList, description: 'One page of results, in case order' },
  },
  {
    method: 'post',
    path: '/api/evaluations/metrics/query',
    summary: "A run's metrics (and per test case across repeats): count, sum, mean, min, max, stddev, p50, p90, p95, p99",
    role: 'viewer',
    body: MetricsQuery,
    ok: { status: 200, schema: MetricsList, description: 'Metrics records' },
  },
];

const jsonSchema = (schema: Schema, io: 'input' | 'output') => {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
};

/** Operations grouped as the docs show them, by what they act on. */
const TAGS: Array<[prefix: string, tag: string]> = [
  ['/services/', 'Invoke'],
  ['/api/sessions/interactions', 'Interactions'],
  ['/api/sessions', 'Sessions'],
  ['/api/keys', 'API keys'],
  ['/api/connections', 'Connections'],
  ['/api/workflows', 'Workflows'],
  ['/api/environments', 'Environments'],
  ['/api/simple/testsets', 'Test sets'],
  ['/api/', 'Evaluations'],
];

function operation(route: Route) {
  const parameters = [
    route.path.startsWith('/api/')
      ? { name: 'project_id', in: 'query', required: false, schema: { type: 'string' }, description: "The project to act in; absent, the API key's own project" }
      : { name: 'project_id', in: 'query', required: true, schema: { type: 'string' }, description: 'The project to act in' },
    ...(route.params ?? []).map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
    ...Object.entries(route.query ?? {}).map(([name, query]) => ({ name, in: 'query', required: query.required ?? false, schema: jsonSchema(query.schema, 'input'), description: query.description })),
    ...Object.entries(route.headers ?? {}).map(([name, header]) => ({ name, in: 'header', required: false, schema: jsonSchema(header.schema, 'input'), description: header.description })),
  ];
  const errors = { description: 'An error, in the envelope; status.type names it', content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } } };
  return {
    tags: [TAGS.find(([prefix]) => route.path.startsWith(prefix))![1]],
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

export function openApiDocument(version: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of ROUTES) (paths[route.path] ??= {})[route.method] = operation(route);
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
