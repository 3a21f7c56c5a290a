/**
 * `npm run bench:log-line`: the CPU of one access-log line (the line every request writes at
 * `info`) through pino, with agentd's redaction (src/telemetry/log-redaction.ts), with pino's own
 * `redact` paths for the same rules (what agentd used before), and with none, in turns so the
 * machine's drift hits all three alike. µs of CPU per line, written to a sink that drops it.
 */
import pino from 'pino';
import { redactLogFields } from '../src/telemetry/log-redaction.ts';

const LINES = Number(process.env.BENCH_LOG_LINES ?? 200_000);
const ROUNDS = Number(process.env.BENCH_LOG_ROUNDS ?? 5);

const sink = { write: (_line: string) => {} };
// As Fastify's serializers write a request and a reply.
const serializers = {
  req: (req: typeof request) => ({ method: req.method, url: req.url, host: req.host, remoteAddress: req.ip, remotePort: 50_123 }),
  res: (res: typeof reply) => ({ statusCode: res.statusCode }),
};
const PINO_PATHS = ['req.headers.authorization', 'req.headers.cookie', 'req.headers["x-api-key"]', '*.secrets', '*.credentials', '*.apiKey', '*.api_key'];
const loggers = {
  'agentd (formatters.log)': pino({ formatters: { log: redactLogFields }, serializers }, sink),
  "pino's redact paths": pino({ redact: { paths: PINO_PATHS, censor: '[redacted]' }, serializers }, sink),
  'no redaction': pino({ serializers }, sink),
};
const request = { method: 'POST', url: '/services/agent/v0/invoke?project_id=0190f3a1b2c3d4e5', host: '127.0.0.1:8080', ip: '127.0.0.1' };
const reply = { statusCode: 200 };

const results = new Map<string, number[]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, root] of Object.entries(loggers)) {
    const log = root.child({ reqId: 'req-1' });
    const line = () => log.info({ req: request, res: reply, responseTime: 12.5 }, 'request completed');
    for (let i = 0; i < LINES / 10; i++) line();
    const start = process.cpuUsage();
    for (let i = 0; i < LINES; i++) line();
    const used = process.cpuUsage(start);
    results.set(name, [...(results.get(name) ?? []), (used.user + used.system) / LINES]);
  }
  process.stderr.write(`round ${round + 1}/${ROUNDS}\n`);
}
process.stdout.write(`| logger | µs of CPU per line (${ROUNDS} rounds of ${LINES}) |\n|---|---|\n`);
for (const [name, us] of results) process.stdout.write(`| ${name} | ${us.map((u) => u.toFixed(2)).join(', ')} |\n`);
