/**
 * The floors under bench/memory.ts's live streams, each a child process of its own with
 * --expose-gc, given MODEL_URL, STREAMS, FLOOR and API (`responses`, OpenAI's Responses API, or
 * `chat`, Chat Completions as agentd's `openai-compatible` provider calls it). It answers `memory`
 * with its readings, `snapshot` with a heap snapshot into the file it names, and:
 *
 * - FLOOR=provider: the AI SDK's provider streaming answers from the same fake model over
 *   agentd's HTTP client, and nothing else (no server, no turn). `open` opens STREAMS streams at
 *   once, each read to its first part.
 * - FLOOR=served: the same provider's stream behind a bare Fastify server, which answers every
 *   POST by writing each part of it as an SSE frame: the least a server holds for a client reading
 *   a model's answer as it comes. It says its address first (`{ url }`); the parent holds the
 *   requests open.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import Fastify from 'fastify';
import { keepAliveFetch } from '../src/keep-alive-fetch.ts';
import { heapSnapshot, memoryReadings } from './shared.ts';

const streams = Number(process.env.STREAMS);
const model =
  process.env.API === 'chat'
    ? createOpenAICompatible({ name: 'bench', fetch: keepAliveFetch, apiKey: 'sk-bench', baseURL: process.env.MODEL_URL!, includeUsage: true }).chatModel('m')
    : createOpenAI({ fetch: keepAliveFetch, apiKey: 'sk-bench', baseURL: process.env.MODEL_URL }).responses('m');
const streamAnswer = async () => (await model.doStream({ prompt: [{ role: 'user', content: [{ type: 'text', text: 'go' }] }] })).stream.getReader();

async function open(): Promise<ReadableStreamDefaultReader> {
  const reader = await streamAnswer();
  await reader.read();
  return reader;
}

const held: ReadableStreamDefaultReader[] = [];
process.on('message', async (msg: { type: 'memory' | 'open' | 'snapshot'; file?: string }) => {
  if (msg.type === 'snapshot') return void process.send?.(heapSnapshot(msg.file!));
  if (msg.type === 'open') held.push(...(await Promise.all(Array.from({ length: streams }, open))));
  process.send?.(msg.type === 'memory' ? memoryReadings() : { opened: held.length });
});

if (process.env.FLOOR === 'served') {
  const app = Fastify({ logger: false });
  app.post('/', async (request, reply) => {
    const reader = await streamAnswer();
    request.raw.once('close', () => void reader.cancel().catch(() => {}));
    reply.hijack();
    reply.raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (let read = await reader.read(); !read.done; read = await reader.read()) reply.raw.write(`data: ${JSON.stringify(read.value)}\n\n`);
    reply.raw.end();
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as { port: number };
  process.send?.({ url: `http://127.0.0.1:${port}/` });
} else {
  // Loads and compiles what a stream uses, as the server's warm-up turns did for it.
  for (let i = 0; i < 20; i++) await (await open()).cancel();
  process.send?.({});
}
