import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { firstStartCredentials, postJson, startServe } from '../support/child-server.ts';
import { builtin, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { attributesOf as attrs, receivedSpans, startOtlpCollector, type OtlpCollector } from '../support/otlp-collector.ts';
import { createWorkflow } from '../configs/client.ts';
import { createTestset, runEnded, runResults, startRun } from '../evaluation/client.ts';

/**
 * OpenTelemetry export (design.md §2) through the OpenTelemetry JS SDK: with
 * OTEL_EXPORTER_OTLP_ENDPOINT set, every turn is a span sent over OTLP/HTTP to a real HTTP
 * collector, here a loopback receiver that decodes both encodings and keeps what it was sent.
 * One server speaks the default, protobuf (gzipped), the other JSON.
 */

let collector: OtlpCollector;
let h: Harness;
let jsonServer: Harness;

const SECRET = 'tok-otel-9f8e7d6c5b4a';
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

function otelEnv(extra: Record<string, string>) {
  return (modelUrl: string) => ({
    OTEL_EXPORTER_OTLP_ENDPOINT: `${collector.url}/`,
    OTEL_EXPORTER_OTLP_HEADERS: 'x-backend-key=k%3D1,x-team=agents',
    OTEL_BSP_SCHEDULE_DELAY: '20',
    OTEL_SERVICE_NAME: 'agentd-under-test',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test,team=agents',
    ANTHROPIC_BASE_URL: modelUrl,
    ANTHROPIC_API_KEY: 'sk-ant-otel',
    ...extra,
  });
}

beforeAll(async () => {
  collector = await startOtlpCollector();
  h = await startHarness({ env: otelEnv({ OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip' }) });
  jsonServer = await startHarness({ env: otelEnv({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }) });
});
afterAll(async () => {
  await h.close();
  await jsonServer.close();
  await collector.close();
});

const spans = () => receivedSpans(collector.received);

async function spanWhere(match: (span: any) => boolean, what: string): Promise<{ span: any; resource: any }> {
  for (let i = 0; i < 200; i++) {
    const found = spans().find((s) => match(s.span));
    if (found) return found;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`${what} never reached the collector`);
}

const spanOf = (spanId: string) => spanWhere((span) => span.spanId === spanId, `span ${spanId}`);

/** A span's children already received (named starting with `prefix`), in the order they started. */
const childrenOf = (spanId: string, prefix = ''): any[] =>
  spans()
    .map((s) => s.span)
    .filter((span) => span.parentSpanId === spanId && span.name.startsWith(prefix))
    .sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1));

describe('OpenTelemetry export', () => {
  it.each([
    { encoding: 'protobuf', contentType: 'application/x-protobuf', contentEncoding: 'gzip', server: () => h },
    { encoding: 'JSON', contentType: 'application/json', contentEncoding: undefined, server: () => jsonServer },
  ])('sends each turn as a span with the ids the reply names, under the caller’s trace ($encoding)', async ({ contentType, contentEncoding, server }) => {
    const h = server();
    const session = sid('otel');
    h.model.script([{ toolCalls: [{ name: 'ls', input: {} }] }, { text: 'listed' }]);
    const res = await h.invoke(invokeBody([{ role: 'user', content: `list it, my token is ${SECRET}` }], template({ tools: [builtin('ls')], mode: 'allow' }), { session_id: session, secrets: { MY_TOKEN: SECRET } }), {
      headers: { traceparent: `00-${TRACE}-${PARENT}-01` },
    });
    const reply = await readJson(res);
    expect(reply.trace_id).toBe(TRACE);

    const { span, resource } = await spanOf(reply.span_id);
    expect(span).toMatchObject({ traceId: TRACE, spanId: reply.span_id, parentSpanId: PARENT, name: 'invoke_agent', kind: 2, status: { code: 1 } });
    expect(BigInt(span.endTimeUnixNano)).toBeGreaterThan(BigInt(span.startTimeUnixNano));
    expect(attrs(span.attributes)).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.conversation.id': session,
      'gen_ai.provider.name': 'openai',
      'agentd.turn.id': reply.turn_id,
      'agentd.project.id': h.projectId,
      'agentd.turn.status': 'completed',
      'agentd.turn.stop_reason': 'end_turn',
      'gen_ai.usage.input_tokens': reply.data.outputs.usage.input,
    });
    // The tool ran as a child span of the turn, inside it.
    const { span: tool } = await spanWhere((s) => s.parentSpanId === reply.span_id && s.name.startsWith('execute_tool'), 'the tool span');
    expect(tool).toMatchObject({ traceId: TRACE, name: 'execute_tool ls', kind: 1, status: { code: 1 } });
    expect(attrs(tool.attributes)).toEqual({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'ls',
      'gen_ai.tool.call.id': expect.any(String),
      'agentd.tool.is_error': false,
    });
    expect(BigInt(tool.startTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(span.startTimeUnixNano));
    expect(BigInt(tool.endTimeUnixNano)).toBeLessThanOrEqual(BigInt(span.endTimeUnixNano));
    // Each model call is a client span of the turn: the one that asked for the tool, then the
    // one that answered after it, one on each side of the tool's run.
    const calls = childrenOf(reply.span_id, 'chat');
    expect(calls).toHaveLength(2);
    for (const call of calls) {
      expect(call).toMatchObject({ traceId: TRACE, name: 'chat fake-model', kind: 3, status: { code: 1 } });
      expect(attrs(call.attributes)).toEqual({ 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'fake-model' });
    }
    const [asked, answered] = calls;
    expect(BigInt(asked.startTimeUnixNano)).toBe(BigInt(span.startTimeUnixNano));
    expect(BigInt(asked.endTimeUnixNano)).toBeLessThanOrEqual(BigInt(tool.startTimeUnixNano));
    expect(BigInt(answered.startTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(tool.endTimeUnixNano));
    expect(BigInt(answered.endTimeUnixNano)).toBeLessThanOrEqual(BigInt(span.endTimeUnixNano));
    expect(span.events).toEqual([]);
    expect(attrs(resource.attributes)).toMatchObject({ 'service.name': 'agentd-under-test', 'deployment.environment': 'test', team: 'agents' });

    const request = collector.received.find((r) => JSON.stringify(r.body).includes(reply.span_id))!;
    expect(request.path).toBe('/v1/traces');
    expect(request.headers['content-type']).toBe(contentType);
    expect(request.headers['content-encoding']).toBe(contentEncoding);
    expect(request.headers['x-backend-key']).toBe('k=1');
    expect(request.headers['x-team']).toBe('agents');
    // Names, ids and counts only: neither the conversation nor a secret leaves in a span.
    expect(request.raw.toString('latin1')).not.toContain(SECRET);
    expect(request.raw.toString('latin1')).not.toContain('list it');
  });

  it('gives a tool run after an approval a span in the turn that ran it, named for its tool', async () => {
    const session = sid('otel-approval');
    const agent = template({ tools: [builtin('write')], mode: 'ask' });
    const first = [{ role: 'user', content: 'write it' }];
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'o.txt', content: 'x' } }] }, { text: 'written' }]);
    const paused = await readJson(await h.invoke(invokeBody(first, agent, { session_id: session })));
    const { span: pausedSpan } = await spanOf(paused.span_id);
    expect(pausedSpan.events.map((e: any) => e.name)).toEqual(['interaction_request']);

    const decided = paused.data.outputs.messages.map((m: any) => (m.approval ? { ...m, approval: { ...m.approval, approved: true } } : m));
    const done = await readJson(await h.invoke(invokeBody([...first, ...decided], agent, { session_id: session })));
    const { span: turn } = await spanOf(done.span_id);
    // Answered in band, the turn runs in a trace of its own, linked back to the pause it goes on from.
    expect(done.trace_id).not.toBe(paused.trace_id);
    expect(turn.links).toEqual([expect.objectContaining({ traceId: paused.trace_id, spanId: paused.span_id, attributes: [{ key: 'agentd.link.name', value: { stringValue: 'continues' } }] })]);
    const { span: tool } = await spanWhere((s) => s.parentSpanId === done.span_id && s.name.startsWith('execute_tool'), 'the tool span');
    expect(tool).toMatchObject({ name: 'execute_tool write', startTimeUnixNano: turn.startTimeUnixNano, status: { code: 1 } });
    expect(attrs(tool.attributes)).toMatchObject({ 'gen_ai.tool.name': 'write', 'agentd.tool.is_error': false });
    // The paused turn ran no tool, only the model call that asked for it; the continuation asked
    // the model once, after the tool.
    expect(childrenOf(paused.span_id).map((s) => s.name)).toEqual(['chat fake-model']);
    const [answered] = childrenOf(done.span_id, 'chat');
    expect(BigInt(answered.startTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(tool.endTimeUnixNano));
    expect(childrenOf(done.span_id, 'chat')).toHaveLength(1);
  });

  it('traces a harness turn the same way: the turn span, and a span for the tool Claude ran', async () => {
    const session = sid('otel-claude');
    h.model.script([{ toolCalls: [{ name: 'Write', input: { file_path: `${h.sessionDir(session)}/traced.txt`, content: 'x' } }] }, { text: 'written' }]);
    const agent = { llm: { provider: 'anthropic', model: 'fake-model' }, harness: { kind: 'claude' }, runner: { permissions: { default: 'allow' } } };
    const reply = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write' }], agent, { session_id: session })));
    const { span: turn } = await spanWhere((s) => s.spanId === reply.span_id, 'the turn span');
    expect(turn.status).toMatchObject({ code: 1 });
    const { span: tool } = await spanWhere((s) => s.parentSpanId === reply.span_id && s.name.startsWith('execute_tool'), 'the tool span');
    expect(tool).toMatchObject({ name: 'execute_tool Write', status: { code: 1 } });
  }, 60_000);

  it("records the request's tags and meta on the turn span and its links as span links, its secrets masked", async () => {
    jsonServer.model.script({ text: 'ok' });
    const link = { trace_id: '0AF7651916CD43DD8448EB211C80319C', span_id: 'b7ad6b7169203331' };
    const body = invokeBody([{ role: 'user', content: 'hi' }], template(), {
      session_id: sid('otel-tags'),
      secrets: { MY_TOKEN: SECRET },
      tags: { team: 'search', leaked: SECRET, 'nothing': null },
      meta: { ticket: 12, nested: { a: [1, 2] }, long: 'x'.repeat(5_000) },
      links: { parent_eval: link, broken: { trace_id: 'not-hex', span_id: '00' } },
    });
    const reply = await readJson(await jsonServer.invoke(body));
    const { span } = await spanOf(reply.span_id);
    const attributes = attrs(span.attributes);
    expect(attributes).toMatchObject({
      'agentd.tags.team': 'search',
      'agentd.tags.leaked': '[redacted]',
      'agentd.meta.ticket': 12,
      'agentd.meta.nested': '{"a":[1,2]}',
    });
    expect(attributes).not.toHaveProperty('agentd.tags.nothing');
    expect(attributes['agentd.meta.long']).toHaveLength(1_000);
    expect(span.links).toEqual([{ traceId: link.trace_id.toLowerCase(), spanId: link.span_id, attributes: [{ key: 'agentd.link.name', value: { stringValue: 'parent_eval' } }], droppedAttributesCount: 0, flags: expect.any(Number) }]);
    const request = collector.received.find((r) => JSON.stringify(r.body).includes(reply.span_id))!;
    expect(request.raw.toString('latin1')).not.toContain(SECRET);
  });

  it('marks a failed turn as an error with its type', async () => {
    h.model.script({ error: { status: 401 } });
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template()));
    expect(res.status).toBe(424);
    const reply = await readJson(res);
    const { span } = await spanOf(reply.span_id);
    expect(span.status).toMatchObject({ code: 2, message: reply.status.message });
    expect(attrs(span.attributes)).toMatchObject({ 'error.type': 'upstream-auth', 'agentd.turn.status': 'failed' });
    // The model call it failed on is the error's, too.
    const [call] = childrenOf(reply.span_id, 'chat');
    expect(call).toMatchObject({ name: 'chat fake-model', status: { code: 2, message: reply.status.message } });
    expect(attrs(call.attributes)).toMatchObject({ 'error.type': 'upstream-auth' });
  });

  it('exports nothing for a turn whose caller did not sample its trace', async () => {
    h.model.script({ text: 'quiet' });
    const unsampled = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template()), { headers: { traceparent: `00-${TRACE}-${PARENT}-00` } }));
    h.model.script({ text: 'loud' });
    const sampled = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template())));
    await spanOf(sampled.span_id);
    expect(spans().some((s) => s.span.spanId === unsampled.span_id)).toBe(false);
  });

  it("exports an evaluation case as an internal span that names its run and result, with the AI SDK's own spans of its judge under it", async () => {
    const rubric = 'Is it a fine case answer?';
    h.model.script([{ text: 'case answer' }, { text: '{"score": 0.9, "reason": "fine"}' }]);
    const appRevision = (await createWorkflow(h, 'otel-target', { agent: template() })).revision.id;
    const revision = (await createTestset(h, { name: 'otel-cases', data: { testcases: [{ data: { messages: [{ role: 'user', content: 'one case' }] } }] } })).revision_id;
    const created = await startRun(h, revision, appRevision, { concurrency: { batch_size: 1 }, evaluators: [{ kind: 'llm_judge', name: 'judge', rubric }] });
    expect((await runEnded(h, created.id)).data.status).toBe('success');
    const [result] = await runResults(h, created.id);
    expect(result.scores).toEqual([expect.objectContaining({ name: 'judge', score: 0.9 })]);
    const { span } = await spanWhere((s) => s.traceId === result.trace_id && s.name === 'invoke_agent', "the case's span");
    expect(span).toMatchObject({ name: 'invoke_agent', kind: 1 });
    expect(attrs(span.attributes)).toMatchObject({ 'agentd.evaluation.run_id': created.id, 'agentd.evaluation.result_id': result.id, 'gen_ai.conversation.id': result.session_id });
    // The judge's call went through the AI SDK's generateText; the AI SDK's OpenTelemetry
    // integration made its spans, in the case's trace, under the case's span.
    const { span: judge } = await spanWhere((s) => s.traceId === result.trace_id && s.parentSpanId === span.spanId && s.name !== 'chat fake-model', "the judge's AI SDK span");
    expect(judge).toMatchObject({ name: 'invoke_agent fake-model', kind: 1 });
    expect(attrs(judge.attributes)).toMatchObject({ 'gen_ai.agent.name': 'llm_judge', 'gen_ai.request.model': 'fake-model' });
    // Its step, and in the step the model call, a client span with the call's own usage and finish reason.
    const [step] = childrenOf(judge.spanId);
    const [call] = childrenOf(step.spanId);
    expect(call).toMatchObject({ name: 'chat fake-model', kind: 3 });
    expect(attrs(call.attributes)).toMatchObject({ 'gen_ai.usage.input_tokens': expect.any(Number), 'gen_ai.response.finish_reasons': expect.anything() });
    // As agentd's own spans, they hold no prompt and no answer.
    const request = collector.received.find((r) => JSON.stringify(r.body).includes(judge.spanId))!;
    expect(request.raw.toString('latin1')).not.toContain(rubric);
    expect(request.raw.toString('latin1')).not.toContain('fine');
  });

  it('a collector that cannot be reached costs the turns nothing and is reported in the log, without the credentials its URL carries', async () => {
    // The exporter retries a refused connection with backoff until its timeout, then gives the batch up.
    const down = await startHarness({ logs: true, env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://otel:url-s3cret@127.0.0.1:9/v1/traces', OTEL_BSP_SCHEDULE_DELAY: '20', OTEL_EXPORTER_OTLP_TIMEOUT: '300' } });
    try {
      h.model.script({ text: 'fine' });
      down.model.script({ text: 'fine anyway' });
      const reply = await readJson(await down.invoke(invokeBody([{ role: 'user', content: 'hi' }], template())));
      expect(reply.data.outputs.messages.at(-1).content).toBe('fine anyway');
      for (let i = 0; i < 400 && !down.logs.some((l) => l.includes('could not send spans')); i++) await new Promise((r) => setTimeout(r, 25));
      const warning = JSON.parse(down.logs.find((l) => l.includes('could not send spans'))!);
      // The turn and its one model call.
      expect(warning).toMatchObject({ spans: 2, url: 'http://127.0.0.1:9/v1/traces' });
      expect(warning.error).toMatch(/ECONNREFUSED|timeout/i);
      // Said once, not again by the SDK's own error handler.
      await new Promise((r) => setTimeout(r, 100));
      expect(down.logs.filter((l) => l.includes('OpenTelemetry'))).toHaveLength(1);
      expect(down.logs.join('\n')).not.toContain('url-s3cret');
    } finally {
      await down.close();
    }
  });

  it('a collector that refuses the spans repeating the headers it was sent leaves their values out of the log', async () => {
    // A proxy or collector that echoes the request's headers in its refusal: its reason phrase is the SDK's error message.
    const echoing = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.statusMessage = `unknown key ${String(req.headers['x-backend-key'])}`;
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ headers: req.headers }));
      });
    });
    await new Promise<void>((resolve) => echoing.listen(0, '127.0.0.1', resolve));
    const refused = await startHarness({
      logs: true,
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(echoing.address() as AddressInfo).port}`,
        OTEL_EXPORTER_OTLP_HEADERS: `x-backend-key=${SECRET}`,
        OTEL_BSP_SCHEDULE_DELAY: '20',
      },
    });
    try {
      refused.model.script({ text: 'fine anyway' });
      const reply = await readJson(await refused.invoke(invokeBody([{ role: 'user', content: 'hi' }], template())));
      expect(reply.data.outputs.messages.at(-1).content).toBe('fine anyway');
      for (let i = 0; i < 400 && !refused.logs.some((l) => l.includes('could not send spans')); i++) await new Promise((r) => setTimeout(r, 25));
      expect(JSON.parse(refused.logs.find((l) => l.includes('could not send spans'))!).error).toBe('unknown key [redacted]');
      expect(refused.logs.join('\n')).not.toContain(SECRET);
    } finally {
      await refused.close();
      echoing.close();
    }
  });

  it('a server stopping while its collector cannot be reached stops cleanly, the spans it could not send said in its log', async () => {
    // The turn's spans wait in the batch until the stop flushes them; the collector refuses them.
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-otel-stop-'));
    const server = await startServe({
      AGENTD_DATA_DIR: dataDir,
      OPENAI_API_KEY: 'sk-otel-stop',
      OPENAI_BASE_URL: h.model.url,
      AGENTD_DEFAULT_MODEL: 'fake-model',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://otel:url-s3cret@127.0.0.1:9/v1/traces',
      OTEL_BSP_SCHEDULE_DELAY: '600000',
      OTEL_EXPORTER_OTLP_TIMEOUT: '300',
    });
    try {
      h.model.script({ text: 'traced, then stopped' });
      const res = await postJson(server.url, '/services/agent/v0/invoke', firstStartCredentials(server.output()), invokeBody([{ role: 'user', content: 'hi' }], template()));
      expect(res.status).toBe(200);
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      const warning = server.output().split('\n').find((line) => line.includes('could not send spans'));
      expect(warning && JSON.parse(warning)).toMatchObject({ spans: 2, url: 'http://127.0.0.1:9/v1/traces' });
      expect(server.output()).not.toContain('url-s3cret');
    } finally {
      server.child.kill('SIGKILL');
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('OpenTelemetry settings', () => {
  it('are off without an endpoint or with OTEL_SDK_DISABLED, and read the standard variables', () => {
    expect(loadConfig({}).otlp).toBeUndefined();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }).otlp).toBeUndefined();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }).otlp).toEqual({
      url: 'http://c:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      compression: 'none',
      timeoutMs: 10_000,
      serviceName: 'agentd',
      resource: {},
      batch: { scheduleDelayMs: 5000, maxQueueSize: 2048, maxExportBatchSize: 512, exportTimeoutMs: 30_000 },
    });
    expect(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip',
        OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '2500',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod,k8s.pod.name=agentd-7,Team.Name=Agents',
        OTEL_EXPORTER_OTLP_HEADERS: 'X-Backend-Key=k',
        OTEL_BSP_MAX_QUEUE_SIZE: '100',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '500',
        OTEL_BSP_EXPORT_TIMEOUT: '1000',
      }).otlp,
    ).toMatchObject({
      protocol: 'http/json',
      compression: 'gzip',
      timeoutMs: 2500,
      // Attribute keys keep their case; header names, case-insensitive, are lower-cased.
      resource: { 'deployment.environment': 'prod', 'k8s.pod.name': 'agentd-7', 'Team.Name': 'Agents' },
      headers: { 'x-backend-key': 'k' },
      // A batch is never larger than the queue.
      batch: { maxQueueSize: 100, maxExportBatchSize: 100, exportTimeoutMs: 1000 },
    });
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://t.example/x' }).otlp?.url).toBe('https://t.example/x');
  });

  it('refuse what they cannot honour, saying what to set', () => {
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/"grpc" is not supported.*http\/protobuf.*http\/json/);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_COMPRESSION: 'zstd' })).toThrow(/gzip or none/);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(/http\(s\) URL/);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_HEADERS: 'no-equals' })).toThrow(/key=value/);
  });
});
