/**
 * `npm run bench:http-client`: the HTTP client under every model call (issue 21). agentd's own
 * `keepAliveFetch` (src/keep-alive-fetch.ts, over `node:http`) against undici's `request` on a
 * `Pool`, undici's `fetch` and Node's global `fetch`, for the same model calls to the fake model in
 * a process of its own: CPU per call of this process (the client's side only), interleaved round by
 * round, 10 calls in flight, a JSON answer and a streamed one, each body read to its end.
 *
 * BENCH_HTTP_ROUNDS (default 10) rounds of BENCH_HTTP_CALLS (default 300) calls per client.
 * BENCH_HTTP_BASELINE names another keep-alive-fetch.ts (an earlier commit's, from `git show`) to
 * run beside it, for an A/B.
 */
import { fork } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { Agent, Pool, fetch as undiciFetch, request as undiciRequest } from 'undici';
import { keepAliveFetch } from '../src/keep-alive-fetch.ts';

const rounds = Number(process.env.BENCH_HTTP_ROUNDS ?? 10);
const calls = Number(process.env.BENCH_HTTP_CALLS ?? 300);
const inFlight = 10;

const model = fork(path.join(import.meta.dirname, 'model-server.ts'), [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
const { url } = await new Promise<{ url: string }>((resolve) => model.once('message', resolve));
const origin = new URL(url).origin;
const pool = new Pool(origin, { connections: inFlight });
const agent = new Agent({ connections: inFlight });

const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };
const bodyOf = (stream: boolean) => JSON.stringify({ model: 'fake-model', stream, messages: [{ role: 'user', content: 'hi' }] });

type Call = (stream: boolean) => Promise<string>;
const viaFetch =
  (f: typeof globalThis.fetch): Call =>
  async (stream) =>
    (await f(`${url}/chat/completions`, { method: 'POST', headers, body: bodyOf(stream) })).text();

const baseline = process.env.BENCH_HTTP_BASELINE ? ((await import(path.resolve(process.env.BENCH_HTTP_BASELINE))) as { keepAliveFetch: typeof globalThis.fetch }) : undefined;

const clients: Record<string, Call> = {
  keepAliveFetch: viaFetch(keepAliveFetch),
  ...(baseline ? { 'keepAliveFetch, baseline': viaFetch(baseline.keepAliveFetch) } : {}),
  'undici Pool.request': async (stream) => {
    const res = await pool.request({ path: `${new URL(url).pathname}/chat/completions`, method: 'POST', headers, body: bodyOf(stream) });
    return res.body.text();
  },
  // What a fetch over undici's `request` would cost: the Response the AI SDK's providers read.
  'undici request+Response': async (stream) => {
    const res = await undiciRequest(`${url}/chat/completions`, { method: 'POST', headers, body: bodyOf(stream), dispatcher: agent });
    const body = stream ? (Readable.toWeb(res.body) as ReadableStream<Uint8Array>) : await res.body.arrayBuffer();
    return new Response(body, { status: res.statusCode, headers: res.headers as Record<string, string> }).text();
  },
  'undici request+stream': async (stream) => {
    const res = await undiciRequest(`${url}/chat/completions`, { method: 'POST', headers, body: bodyOf(stream), dispatcher: agent });
    return new Response(Readable.toWeb(res.body) as ReadableStream<Uint8Array>, { status: res.statusCode, headers: res.headers as Record<string, string> }).text();
  },
  'undici fetch': viaFetch(undiciFetch as unknown as typeof globalThis.fetch),
  'global fetch': viaFetch(globalThis.fetch),
};

/** CPU µs per call of this process, and wall ms for the whole round. */
async function round(call: Call, stream: boolean): Promise<{ cpu: number; wall: number }> {
  const started = performance.now();
  const before = process.cpuUsage();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < calls) {
        next++;
        const text = await call(stream);
        if (!text.includes(stream ? '[DONE]' : 'fake model')) throw new Error(`unexpected answer: ${text.slice(0, 200)}`);
      }
    }),
  );
  const used = process.cpuUsage(before);
  return { cpu: (used.user + used.system) / calls, wall: performance.now() - started };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const results = new Map<string, number[]>();
// Warm every client up (connections, JIT) before anything is counted.
for (const call of Object.values(clients)) for (const stream of [false, true]) await round(call, stream);
const entries = Object.entries(clients);
for (let r = 0; r < rounds; r++) {
  // Each round starts with another client, so none always pays for the garbage of the one before.
  for (const [name, call] of [...entries.slice(r % entries.length), ...entries.slice(0, r % entries.length)]) {
    for (const stream of [false, true]) {
      const key = `${name}|${stream ? 'streamed' : 'JSON'}`;
      const { cpu } = await round(call, stream);
      results.set(key, [...(results.get(key) ?? []), cpu]);
    }
  }
  process.stderr.write(`round ${r + 1}/${rounds}\n`);
}

console.log(`CPU µs per model call on the client's side, median of ${rounds} rounds of ${calls} calls, ${inFlight} in flight`);
console.log(`${'client'.padEnd(26)}  JSON  streamed`);
for (const name of Object.keys(clients)) {
  const json = median(results.get(`${name}|JSON`)!);
  const streamed = median(results.get(`${name}|streamed`)!);
  console.log(`${name.padEnd(26)} ${json.toFixed(0).padStart(5)}   ${streamed.toFixed(0).padStart(5)}`);
}

await pool.close();
await agent.close();
model.send({ type: 'stop' });
