/**
 * The floor for bench/run.ts: a bare Fastify app (no logger, no auth, no store) that makes the
 * same model calls an agentd turn makes, with the bodies agentd itself sent (captured by run.ts
 * from one real turn and passed in FLOOR_TEMPLATES), so the gap to agentd is everything agentd,
 * and the AI SDK under it, does beyond those calls.
 *
 * - POST /floor/tool: the tool turn. Two Responses calls, not streamed, as agentd makes them for a
 *   JSON reply; the first answer is read for the function call, whose file is written (in a
 *   folder of the request's own, as agentd writes in the session's), and the second call carries
 *   its result. Replies with a small JSON.
 * - POST /floor/stream-tool: the same turn streamed: both calls' SSE relayed as they come, the
 *   function call read out of the first.
 * - POST /floor/stream: one streamed call whose SSE bytes are relayed to the client as they come.
 * - POST /floor/echo: the same call, not streamed, as a JSON reply makes it; replies with its text.
 * - POST /floor/vercel: the streamed call, each text delta read out of the SSE and written as the
 *   Vercel AI SDK's UI message stream (start, text-start, text-delta…, text-end, finish, [DONE]).
 *
 * Not the floor, a reference between it and agentd: /sdk/tool, /sdk/stream-tool, /sdk/stream,
 * /sdk/echo and /sdk/vercel make the same calls through the AI SDK's `generateText` and
 * `streamText` (the Vercel one with its own `pipeUIMessageStreamToResponse`), with agentd's own
 * `write` tool on one folder, and nothing else: no auth, store, session folder, events or
 * logging. floor → sdk is what the SDK costs; sdk → agentd is what agentd itself adds.
 *
 * Another reference: /provider/echo, /provider/tool, /provider/stream, /provider/vercel and
 * /provider/stream-tool drive the provider's own model interface (`doGenerate` / `doStream` of the
 * `LanguageModel` it returns) with a step loop of the barest kind, over agentd's HTTP client
 * (`keepAliveFetch`), as agentd's turn engine drives it (issue 21's decision), and write the text
 * as it comes. floor → provider is what the provider's request building and response parsing
 * cost, which the decision keeps with the AI SDK; provider → agentd is everything agentd adds.
 *
 * Env: MODEL_URL (the fake model's `/v1` base), FLOOR_TEMPLATES (path to a FloorTemplates JSON).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { createOpenAI } from '@ai-sdk/openai';
import type { LanguageModelV4Content, LanguageModelV4FunctionTool, LanguageModelV4Prompt, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { asSchema } from '@ai-sdk/provider-utils';
import { generateText, isStepCount, streamText, type ModelMessage } from 'ai';
import Fastify, { type FastifyReply } from 'fastify';
import { writeTool } from '../src/agent/tools/write.ts';
import { keepAliveFetch } from '../src/keep-alive-fetch.ts';
import { serveLoopStats, type FloorTemplates, type Ready } from './shared.ts';

const modelUrl = process.env.MODEL_URL;
const templatesFile = process.env.FLOOR_TEMPLATES;
if (!modelUrl || !templatesFile) throw new Error('set MODEL_URL and FLOOR_TEMPLATES');
const templates = JSON.parse(readFileSync(templatesFile, 'utf8')) as FloorTemplates;
const responsesUrl = `${modelUrl}/responses`;
const modelHeaders = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };

type Item = Record<string, unknown>;

function callModel(body: unknown): Promise<Response> {
  return fetch(responsesUrl, { method: 'POST', headers: modelHeaders, body: JSON.stringify(body) });
}

type Output = Array<{ type: string; call_id?: string; name?: string; arguments?: string; content?: Array<{ type: string; text?: string }> }>;

/** The function call the model asked for, from a Responses JSON body. */
function functionCall(output: Output): { call_id: string; name: string; arguments: string } {
  const call = output.find((item) => item.type === 'function_call');
  if (!call) throw new Error('the model answered without a function call');
  return call as { call_id: string; name: string; arguments: string };
}

/** The final text, from a Responses JSON body. */
function outputText(output: Output): string {
  return output.flatMap((item) => (item.type === 'message' ? (item.content ?? []) : [])).map((part) => part.text ?? '').join('');
}

const app = Fastify({ logger: false });

/** Hijacks the reply for an event stream: a function that writes one `data:` frame of JSON. */
function sse(reply: FastifyReply, headers: Record<string, string> = {}): (value: object) => void {
  reply.hijack();
  reply.raw.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...headers });
  return (value) => reply.raw.write(`data: ${JSON.stringify(value)}\n\n`);
}

/** Where the floor's tool writes: a folder per request under this one, as agentd's sessions have. */
const folders = mkdtempSync(path.join(os.tmpdir(), 'agentd-bench-floor-'));

/** The `write` tool at its barest: the request's folder, the file, and what the model is told. */
async function write(call: { arguments: string }): Promise<string> {
  const { path: file, content } = JSON.parse(call.arguments) as { path: string; content: string };
  const folder = path.join(folders, randomUUID());
  await mkdir(folder);
  await writeFile(path.join(folder, file), content);
  return `wrote ${Buffer.byteLength(content)} bytes to ${file}`;
}

/** The second call of a tool turn: agentd's own body, with this call's id and result. */
function secondCall(template: unknown, call: { call_id: string }, result: string): Item {
  const second = template as { input: Item[] };
  const input = second.input.map((item) => (item.type === 'function_call_output' ? { ...item, call_id: call.call_id, output: result } : typeof item.call_id === 'string' ? { ...item, call_id: call.call_id } : item));
  return { ...second, input };
}

app.post('/floor/tool', async () => {
  const first = await callModel(templates.tool[0]);
  if (!first.ok) throw new Error(`model answered ${first.status}`);
  const call = functionCall(((await first.json()) as { output: Output }).output);
  const final = await callModel(secondCall(templates.tool[1], call, await write(call)));
  if (!final.ok) throw new Error(`model answered ${final.status}`);
  return { text: outputText(((await final.json()) as { output: Output }).output), tool_call_id: call.call_id };
});

app.post('/floor/stream-tool', async (_request, reply) => {
  const first = await callModel(templates.streamTool[0]);
  if (!first.ok || !first.body) throw new Error(`model answered ${first.status}`);
  reply.hijack();
  const out = reply.raw;
  out.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  let call: { call_id: string; name: string; arguments: string } | undefined;
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const bytes of first.body as unknown as AsyncIterable<Uint8Array>) {
    out.write(bytes);
    buffered += decoder.decode(bytes, { stream: true });
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.startsWith('data: ') || !line.includes('"response.output_item.done"')) continue;
      const item = (JSON.parse(line.slice(6)) as { item: { type: string; call_id: string; name: string; arguments: string } }).item;
      if (item.type === 'function_call') call = item;
    }
  }
  if (!call) throw new Error('the model streamed no function call');
  const final = await callModel(secondCall(templates.streamTool[1], call, await write(call)));
  if (!final.ok || !final.body) throw new Error(`model answered ${final.status}`);
  for await (const bytes of final.body as unknown as AsyncIterable<Uint8Array>) out.write(bytes);
  out.end();
});

app.post('/floor/stream', async (_request, reply) => {
  const upstream = await callModel(templates.stream);
  if (!upstream.ok || !upstream.body) throw new Error(`model answered ${upstream.status}`);
  reply.header('content-type', 'text/event-stream; charset=utf-8').header('cache-control', 'no-cache');
  return reply.send(Readable.fromWeb(upstream.body as import('node:stream/web').ReadableStream));
});

app.post('/floor/echo', async () => {
  const answer = await callModel({ ...(templates.stream as Item), stream: false });
  if (!answer.ok) throw new Error(`model answered ${answer.status}`);
  return { text: outputText(((await answer.json()) as { output: Output }).output) };
});

app.post('/floor/vercel', async (_request, reply) => {
  const upstream = await callModel(templates.stream);
  if (!upstream.ok || !upstream.body) throw new Error(`model answered ${upstream.status}`);
  const chunk = sse(reply, { 'x-vercel-ai-ui-message-stream': 'v1' });
  chunk({ type: 'start' });
  chunk({ type: 'text-start', id: 't' });
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const bytes of upstream.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(bytes, { stream: true });
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.startsWith('data: ')) continue;
      const event = JSON.parse(line.slice(6)) as { type: string; delta?: string };
      if (event.type === 'response.output_text.delta') chunk({ type: 'text-delta', id: 't', delta: event.delta });
    }
  }
  chunk({ type: 'text-end', id: 't' });
  chunk({ type: 'finish' });
  reply.raw.end('data: [DONE]\n\n');
});

const sdkModel = createOpenAI({ apiKey: 'sk-bench', baseURL: modelUrl }).responses('fake-model');
const sdkTools = { write: writeTool(folders) };

/** The system text and user message agentd sent, so the SDK builds bodies of the same size. */
function sdkPrompt(body: unknown): { instructions: string; messages: ModelMessage[] } {
  const input = (body as { input: Array<{ role?: string; content: unknown }> }).input;
  const system = input.find((i) => i.role === 'system')?.content as string;
  const user = input.find((i) => i.role === 'user')?.content as Array<{ text: string }>;
  return { instructions: system, messages: [{ role: 'user', content: user.map((p) => p.text).join('') }] };
}
const sdkToolPrompt = sdkPrompt(templates.tool[0]);
const sdkStreamPrompt = sdkPrompt(templates.stream);

app.post('/sdk/tool', async () => {
  const result = await generateText({ model: sdkModel, ...sdkToolPrompt, tools: sdkTools, stopWhen: isStepCount(50), maxRetries: 0 });
  return { text: result.text };
});

app.post('/sdk/stream', async (_request, reply) => {
  const result = streamText({ model: sdkModel, ...sdkStreamPrompt, maxRetries: 0 });
  const frame = sse(reply);
  for await (const part of result.stream) {
    if (part.type === 'text-delta') frame({ type: 'text', delta: part.text });
  }
  reply.raw.end();
});

app.post('/sdk/stream-tool', async (_request, reply) => {
  const result = streamText({ model: sdkModel, ...sdkToolPrompt, tools: sdkTools, stopWhen: isStepCount(50), maxRetries: 0 });
  const frame = sse(reply);
  for await (const part of result.stream) {
    if (part.type === 'text-delta') frame({ type: 'text', delta: part.text });
    else if (part.type === 'tool-result') frame({ type: 'tool-result', id: part.toolCallId });
  }
  reply.raw.end();
});

app.post('/sdk/echo', async () => {
  const result = await generateText({ model: sdkModel, ...sdkStreamPrompt, maxRetries: 0 });
  return { text: result.text };
});

app.post('/sdk/vercel', async (_request, reply) => {
  reply.hijack();
  streamText({ model: sdkModel, ...sdkStreamPrompt, maxRetries: 0 }).pipeUIMessageStreamToResponse(reply.raw);
});

const providerModel = createOpenAI({ apiKey: 'sk-bench', baseURL: modelUrl, fetch: keepAliveFetch }).responses('fake-model');
const providerTools: LanguageModelV4FunctionTool[] = [
  { type: 'function', name: 'write', description: sdkTools.write.description as string, inputSchema: await asSchema(sdkTools.write.inputSchema).jsonSchema },
];

function providerPrompt({ instructions, messages }: { instructions: string; messages: ModelMessage[] }): LanguageModelV4Prompt {
  return [{ role: 'system', content: instructions }, { role: 'user', content: [{ type: 'text', text: messages[0]!.content as string }] }];
}

/** One step's content, streamed (each text piece to `text` as it comes) or not. */
async function providerStep(prompt: LanguageModelV4Prompt, withTools: boolean, text?: (delta: string) => void): Promise<LanguageModelV4Content[]> {
  const options = { prompt, ...(withTools ? { tools: providerTools } : {}), providerOptions: { openai: { store: false } } };
  if (!text) return (await providerModel.doGenerate(options)).content;
  const content: LanguageModelV4Content[] = [];
  for await (const part of (await providerModel.doStream(options)).stream as unknown as AsyncIterable<LanguageModelV4StreamPart>) {
    if (part.type === 'text-delta') text(part.delta);
    else if (part.type === 'tool-call') content.push(part);
  }
  return content;
}

/** A turn of the provider reference: one step, or two around the `write` tool's call. Its text, unless streamed. */
async function providerTurn(withTools: boolean, text?: (delta: string) => void, toolResult?: (id: string) => void): Promise<string> {
  const prompt = providerPrompt(withTools ? sdkToolPrompt : sdkStreamPrompt);
  let content = await providerStep(prompt, withTools, text);
  const call = content.find((part) => part.type === 'tool-call');
  if (call) {
    const input = JSON.parse(call.input) as { path: string; content: string };
    const result = (await sdkTools.write.execute!(input, { toolCallId: call.toolCallId, messages: [], context: {} })) as string;
    toolResult?.(call.toolCallId);
    content = await providerStep(
      [
        ...prompt,
        { role: 'assistant', content: [{ type: 'tool-call', toolCallId: call.toolCallId, toolName: call.toolName, input }] },
        { role: 'tool', content: [{ type: 'tool-result', toolCallId: call.toolCallId, toolName: call.toolName, output: { type: 'text', value: result } }] },
      ],
      withTools,
      text,
    );
  }
  return content.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('');
}

app.post('/provider/echo', async () => ({ text: await providerTurn(false) }));
app.post('/provider/tool', async () => ({ text: await providerTurn(true) }));

app.post('/provider/stream', async (_request, reply) => {
  const frame = sse(reply);
  await providerTurn(false, (delta) => frame({ type: 'text', delta }));
  reply.raw.end();
});

app.post('/provider/stream-tool', async (_request, reply) => {
  const frame = sse(reply);
  await providerTurn(true, (delta) => frame({ type: 'text', delta }), (id) => frame({ type: 'tool-result', id }));
  reply.raw.end();
});

app.post('/provider/vercel', async (_request, reply) => {
  const chunk = sse(reply, { 'x-vercel-ai-ui-message-stream': 'v1' });
  chunk({ type: 'start' });
  chunk({ type: 'text-start', id: 't' });
  await providerTurn(false, (delta) => chunk({ type: 'text-delta', id: 't', delta }));
  chunk({ type: 'text-end', id: 't' });
  chunk({ type: 'finish' });
  reply.raw.end('data: [DONE]\n\n');
});

await app.listen({ port: 0, host: '127.0.0.1' });
const { port } = app.server.address() as { port: number };
await serveLoopStats();
const ready: Ready = { url: `http://127.0.0.1:${port}` };
process.stdout.write(`${JSON.stringify(ready)}\n`);
process.send?.({ type: 'ready', ...ready });

async function stop(): Promise<void> {
  await app.close();
  rmSync(folders, { recursive: true, force: true });
  process.exit(0);
}
process.on('message', (msg: { type?: string }) => {
  if (msg.type === 'stop') void stop();
});
process.once('SIGTERM', () => void stop());
// The parent (bench/run.ts) went away without saying stop.
process.once('disconnect', () => void stop());
