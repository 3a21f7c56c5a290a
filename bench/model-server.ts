/**
 * The fake model as its own process for the benchmark. It answers instantly by default, so what
 * the bench measures is what sits between a client and the model, not the model.
 *
 * Script, the same for agentd and the floor because both send the same bodies:
 * - the last input is a tool result → final text;
 * - the `write` tool is offered → a call to `write` (WRITTEN);
 * - otherwise → text, after `latencyMs` (set only for the first-token measurement).
 *
 * Control over IPC from bench/run.ts: `{ type: 'latency', ms, jitterMs? }`, `{ type: 'pace', ms }` (the time
 * between a streamed answer's frames, for streams that stay open: bench/memory.ts), `{ type: 'capture', on }` and
 * `{ type: 'captured' }` (answers with the request bodies seen while capturing, so the floor can
 * send exactly what agentd sends), `{ type: 'reset' }` and `{ type: 'peak' }` (peak concurrent
 * requests since the reset).
 */
import { startFakeModel, type FakeReply, type RecordedRequest } from '../src/testing/fake-model.ts';
import { seededRandom } from '../src/testing/seeded-random.ts';
import { STREAM_TEXT, TOOL_ANSWER, WRITTEN, type CapturedRequest, type ModelControl } from './shared.ts';

let latencyMs = 0;
let jitterMs = 0;
// Drawn afresh at each latency message, so every client measured gets the same latencies.
let draws = seededRandom(1);
let paceMs = 0;
let capturing = false;
const captured: CapturedRequest[] = [];

function script(req: RecordedRequest): FakeReply {
  if (capturing) captured.push({ path: req.path, body: req.body });
  const last = req.messages.at(-1);
  if (last?.role === 'tool') return { text: TOOL_ANSWER };
  if (req.tools.includes('write')) return { toolCalls: [{ name: 'write', input: WRITTEN }] };
  const latency = latencyMs + (jitterMs > 0 ? Math.round((draws() * 2 - 1) * jitterMs) : 0);
  return { text: STREAM_TEXT, ...(latency > 0 ? { latencyMs: latency } : {}), ...(paceMs > 0 ? { chunkDelayMs: paceMs } : {}) };
}


// Recording every request would grow memory for the whole run; the capture above is opt-in.
const model = await startFakeModel({ script, record: false });

process.on('message', (msg: ModelControl) => {
  switch (msg.type) {
    case 'latency':
      latencyMs = msg.ms;
      jitterMs = msg.jitterMs ?? 0;
      draws = seededRandom(1);
      process.send?.({ type: 'ok' });
      break;
    case 'pace':
      paceMs = msg.ms;
      process.send?.({ type: 'ok' });
      break;
    case 'capture':
      capturing = msg.on;
      if (msg.on) captured.length = 0;
      process.send?.({ type: 'ok' });
      break;
    case 'reset':
      model.reset();
      process.send?.({ type: 'ok' });
      break;
    case 'peak':
      process.send?.({ type: 'peak', peakInFlight: model.peakInFlight });
      break;
    case 'captured':
      process.send?.({ type: 'captured', requests: captured });
      break;
    case 'stop':
      void model.close().then(() => process.exit(0));
      break;
  }
});

// The parent (bench/run.ts) went away without saying stop.
process.once('disconnect', () => void model.close().then(() => process.exit(0)));

const ready = { url: model.url };
process.stdout.write(`${JSON.stringify(ready)}\n`);
process.send?.({ type: 'ready', ...ready });
