import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { readMetrics, seriesKey, valuesOf } from '../support/prometheus.ts';
import { createWorkflow } from '../configs/client.ts';
import { createTestset, runEnded, startRun } from '../evaluation/client.ts';

/**
 * `GET /metrics` as a Prometheus server reads it (test/support/prometheus.ts), after turns of every
 * kind and after hostile names: a valid page, every series once, histograms whole, counters that
 * only grow, and labels from small fixed sets, never an id or anything a caller wrote.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ env: { AGENTD_METRICS: 'open' } });
});
afterAll(async () => h.close());

const HOSTILE = 'we"ird\\mo\ndel} 1\n# TYPE x counter';
/** The labels agentd's own metrics carry, and the values each may take. */
const LABELS: Record<string, RegExp> = {
  replica: /^[^:]+:\d+$/,
  harness: /^(agentd|claude|codex|pi)$/,
  outcome: /^(completed|paused|failed|cancelled|interrupted|ok|error|success|failure|retry)$/,
  type: /^(input|output|[a-z-]+)$/,
  provider: /^(openai|anthropic|ollama|openai-compatible|demo)$/,
  engine: /^(sqlite|postgres)$/,
  on: /^(server|thread)$/,
  le: /^([0-9.e+-]+|\+Inf)$/,
};

async function scrape(): Promise<ReturnType<typeof readMetrics>> {
  const res = await fetch(`${h.url}/metrics`);
  expect(res.status).toBe(200);
  return readMetrics(await res.text());
}

describe('the metrics page', () => {
  it('stays a valid Prometheus page with bounded labels, and its counters only grow, whatever the turns were', async () => {
    const before = await scrape();
    const ids: string[] = [];
    const json = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'a user text' }], template())));
    ids.push(json.turn_id, json.session_id, json.trace_id, json.span_id);
    for (const headers of [{ accept: 'text/event-stream' }, { accept: 'text/event-stream', 'x-ag-messages-format': 'vercel' }] as Record<string, string>[]) {
      h.model.script({ text: 'streamed' });
      const res = await h.invoke(invokeBody([{ role: 'user', content: 'stream it' }], template()), { headers });
      await res.text();
      ids.push(res.headers.get('x-ag-session-id')!, res.headers.get('x-ag-trace-id')!);
    }
    h.model.script({ error: { status: 500 } });
    await h.invoke(invokeBody([{ role: 'user', content: 'fail' }], template()));
    h.model.script({ toolCalls: [{ name: 'write', input: { path: 'p.txt', content: 'x' } }] });
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'ask first' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: sid('format-paused') })));
    // Names a caller chooses, made to break a page that did not escape them.
    h.model.script({ text: 'hostile' });
    const hostile = await h.invoke(invokeBody([{ role: 'user', content: HOSTILE }], { ...template(), llm: { provider: 'openai', model: HOSTILE } }, { session_id: sid('format-hostile'), tags: { [HOSTILE]: HOSTILE } }));
    expect(hostile.status).toBe(200);
    await hostile.text();
    h.model.script({ text: 'case answer' });
    const appRevision = (await createWorkflow(h, 'format-target', { agent: template() })).revision.id;
    const revision = (await createTestset(h, { name: 'format-cases', data: { testcases: [{ data: { messages: [{ role: 'user', content: 'one case' }] } }] } })).revision_id;
    expect((await runEnded(h, (await startRun(h, revision, appRevision)).id)).data.status).toBe('success');

    const after = await scrape();
    for (const sample of after.samples.filter((s) => s.name.startsWith('agentd_'))) {
      for (const [label, value] of Object.entries(sample.labels)) {
        expect(LABELS[label], `${seriesKey(sample.name, sample.labels)}: label ${label}`).toBeDefined();
        expect(value, `${seriesKey(sample.name, sample.labels)}: label ${label}`).toMatch(LABELS[label]!);
        expect(ids).not.toContain(value);
      }
    }
    // Counters and histograms only grow; a series that was there is still there.
    const then = valuesOf(before.samples);
    const now = valuesOf(after.samples);
    const typeOf = (name: string) => after.types.get(name) ?? after.types.get(name.replace(/_(bucket|count|sum)$/, ''));
    for (const [key, value] of then) {
      if (['counter', 'histogram'].includes(typeOf(key.slice(0, key.indexOf('{')))!)) expect(now.get(key), key).toBeGreaterThanOrEqual(value);
    }
    const added = (key: string) => now.get(key)! - (then.get(key) ?? 0);
    expect(added('agentd_turns_started_total{harness="agentd"}')).toBe(7);
    expect(added('agentd_turns_finished_total{harness="agentd",outcome="failed"}')).toBe(1);
    expect(added('agentd_turns_finished_total{harness="agentd",outcome="paused"}')).toBe(1);
  });

  it('is read by a checker that refuses what a scraper would: a label unescaped, a series twice, a histogram not whole', () => {
    const head = '# HELP m_total a counter\n# TYPE m_total counter\n';
    expect(readMetrics(`${head}m_total{model="a\\"b\\\\c\\nd"} 1\n`).samples[0]!.labels.model).toBe('a"b\\c\nd');
    expect(() => readMetrics(`${head}m_total{model="a"b"} 1\n`)).toThrow(/not a sample|invalid line/);
    expect(() => readMetrics(`${head}m_total{model="a\nb"} 1\n`)).toThrow(/not a sample|invalid line/);
    expect(() => readMetrics(`${head}m_total{a="1",b="2"} 1\nm_total{b="2",a="1"} 2\n`)).toThrow(/twice/);
    expect(() => readMetrics('m_total 1\n')).toThrow(/no HELP and TYPE/);
    const histogram = (inf: number, low: number) => `# HELP h_seconds a histogram\n# TYPE h_seconds histogram\nh_seconds_bucket{le="1",k="x"} ${low}\nh_seconds_bucket{le="+Inf",k="x"} ${inf}\nh_seconds_sum{k="x"} 1\nh_seconds_count{k="x"} 2\n`;
    expect(readMetrics(histogram(2, 1)).samples).toHaveLength(4);
    expect(() => readMetrics(histogram(3, 1))).toThrow(/\+Inf bucket is not its _count/);
    expect(() => readMetrics(histogram(2, 3))).toThrow(/fewer than the one below/);
  });
});
