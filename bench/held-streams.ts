/**
 * The floor under bench/memory.ts's live streams: the AI SDK's OpenAI provider streaming answers
 * from the same fake model over agentd's HTTP client, and nothing else (no server, no turn). A
 * child process of its own with --expose-gc, given MODEL_URL and STREAMS: it opens that many
 * streams at once, each read to its first part, and sends the memory readings before and after
 * over IPC.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { keepAliveFetch } from '../src/keep-alive-fetch.ts';
import { memoryReadings } from './shared.ts';

const streams = Number(process.env.STREAMS);
const model = createOpenAI({ fetch: keepAliveFetch, apiKey: 'sk-bench', baseURL: process.env.MODEL_URL }).responses('m');

async function open(): Promise<ReadableStreamDefaultReader> {
  const { stream } = await model.doStream({ prompt: [{ role: 'user', content: [{ type: 'text', text: 'go' }] }] });
  const reader = stream.getReader();
  await reader.read();
  return reader;
}

// Loads and compiles what a stream uses, as the server's warm-up turns did for it.
for (let i = 0; i < 20; i++) await (await open()).cancel();
const before = memoryReadings();
const held = await Promise.all(Array.from({ length: streams }, open));
const after = memoryReadings();
process.send?.({ before, after }, () => {
  for (const reader of held) void reader.cancel();
  process.exit(0);
});
