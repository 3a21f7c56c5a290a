/**
 * Mastra for bench/run.ts: the same turns as agentd's, made by a Mastra agent over the same AI SDK
 * provider, on a bare Fastify-free `node:http` server (no auth, store or logs, as the floor).
 * Mastra is not a dependency of agentd: bench/run.ts installs it into a cache folder of its own
 * and copies this file there, so the imports below resolve from that folder. Plain JavaScript for
 * that reason (no type stripping under a folder it does not own).
 *
 * Routes, as the floor's: /mastra/echo, /mastra/tool, /mastra/stream, /mastra/vercel,
 * /mastra/stream-tool. Env: MODEL_URL, FLOOR_TEMPLATES (for the system text agentd sends),
 * BENCH_SHARED (bench/shared.ts, for the event-loop figures every server gives the bench).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createOpenAI } from '@ai-sdk/openai';
import { toAISdkStream } from '@mastra/ai-sdk';
import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { pipeUIMessageStreamToResponse } from 'ai';
import { z } from 'zod';

const templates = JSON.parse(readFileSync(process.env.FLOOR_TEMPLATES, 'utf8'));
const system = (body) => body.input.find((item) => item.role === 'system').content;
const model = createOpenAI({ apiKey: 'sk-bench', baseURL: process.env.MODEL_URL }).responses('fake-model');
const providerOptions = { openai: { store: false } };

const folders = mkdtempSync(path.join(os.tmpdir(), 'agentd-bench-mastra-'));
const write = createTool({
  id: 'write',
  description: 'Create or overwrite a file in the session folder with the given content.',
  inputSchema: z.object({ path: z.string(), content: z.string() }),
  execute: async ({ path: file, content }) => {
    const folder = path.join(folders, randomUUID());
    await mkdir(folder);
    await writeFile(path.join(folder, file), content);
    return `wrote ${Buffer.byteLength(content)} bytes to ${file}`;
  },
});
const talker = new Agent({ id: 'echo', name: 'echo', instructions: system(templates.stream), model });
const writer = new Agent({ id: 'writer', name: 'writer', instructions: system(templates.tool[0]), model, tools: { write } });
const say = [{ role: 'user', content: 'Say hello.' }];
const note = [{ role: 'user', content: 'Write the note.' }];

async function sse(res, stream) {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  for await (const delta of stream.textStream) res.write(`data: ${JSON.stringify({ type: 'text', delta })}\n\n`);
  res.end();
}

const routes = {
  '/mastra/echo': async (res) => json(res, { text: (await talker.generate(say, { providerOptions })).text }),
  '/mastra/tool': async (res) => json(res, { text: (await writer.generate(note, { maxSteps: 50, providerOptions })).text }),
  '/mastra/stream': async (res) => sse(res, await talker.stream(say, { providerOptions })),
  '/mastra/stream-tool': async (res) => sse(res, await writer.stream(note, { maxSteps: 50, providerOptions })),
  '/mastra/vercel': async (res) => pipeUIMessageStreamToResponse({ response: res, stream: toAISdkStream(await talker.stream(say, { providerOptions }), { from: 'agent' }) }),
};

function json(res, body) {
  const text = JSON.stringify(body);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    const route = routes[req.url ?? ''];
    if (!route) return json(res, { error: 'no such route' });
    route(res).catch((error) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(error?.message ?? error));
    });
  });
});
server.keepAliveTimeout = 60_000;
const { serveLoopStats } = await import(process.env.BENCH_SHARED);
await serveLoopStats();
server.listen(0, '127.0.0.1', () => {
  const ready = { url: `http://127.0.0.1:${server.address().port}` };
  process.stdout.write(`${JSON.stringify(ready)}\n`);
  process.send?.({ type: 'ready', ...ready });
});

function stop() {
  server.close();
  rmSync(folders, { recursive: true, force: true });
  process.exit(0);
}
process.on('message', (msg) => msg?.type === 'stop' && stop());
process.once('SIGTERM', stop);
process.once('disconnect', stop);
