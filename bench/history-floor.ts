/**
 * The floor for bench/history.ts: a bare Fastify app (no logger, auth, store or turn) that does
 * with an invoke request's conversation only what any server answering it must: read and parse the
 * request, send its messages to the model as a Responses call, read the answer and reply with its
 * text. What it costs per added message is what no turn can avoid; the rest of agentd's is its own.
 *
 * Env: MODEL_URL (the fake model's `/v1` base). Sends `{ url }` over IPC when it listens.
 */
import Fastify from 'fastify';
import { Agent, request } from 'undici';

const responsesUrl = `${process.env.MODEL_URL}/responses`;
const dispatcher = new Agent();

interface InvokeBody {
  data: { inputs: { messages: Array<{ role: string; content: string }> } };
}

const app = Fastify({ bodyLimit: 16 * 1024 * 1024 });
app.post<{ Body: InvokeBody }>('/floor/history', async (req) => {
  const input = req.body.data.inputs.messages.map(({ role, content }) => ({ role, content }));
  const res = await request(responsesUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' },
    body: JSON.stringify({ model: 'fake-model', input, store: false }),
    dispatcher,
  });
  const answer = (await res.body.json()) as { output: Array<{ type: string; content?: Array<{ text?: string }> }> };
  return { text: answer.output.find((item) => item.type === 'message')?.content?.[0]?.text ?? '' };
});
await app.listen({ port: 0, host: '127.0.0.1' });
const { port } = app.server.address() as { port: number };
process.send?.({ url: `http://127.0.0.1:${port}` });
process.once('disconnect', () => void app.close().then(() => process.exit(0)));
