import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redactLogFields } from '../../src/telemetry/log-redaction.ts';
import { invokeBody, startHarness, template, type Harness } from '../support/harness.ts';

/** design.md §6: credentials never reach a log line, whatever a call logs and at whatever level. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ logs: true });
});
afterAll(async () => h.close());

const lines = () => h.logs.map((line) => JSON.parse(line) as Record<string, unknown>);

describe('log lines', () => {
  it('never show the request credential headers, even at trace', async () => {
    const cookie = 'session=cookie-secret-value';
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template()), { headers: { cookie, 'x-api-key': 'header-secret-value' } });
    expect(res.status).toBe(200);
    await res.text();
    const written = h.logs.join('\n');
    expect(written).toContain('incoming request');
    expect(written).toContain('request completed');
    for (const secret of [h.apiKey, 'cookie-secret-value', 'header-secret-value']) expect(written).not.toContain(secret);
  });

  it('censor credential fields of any object a line carries', () => {
    h.logs.length = 0;
    const template = { name: 'kept', secrets: { OPENAI_API_KEY: 'sk-1' }, credentials: 'c-2', apiKey: 'k-3', api_key: 'k-4' };
    h.app.log.warn({ template, count: 2 }, 'with a template');
    h.app.log.child({ reqId: 'r-1' }).info({ connection: { slug: 'main', api_key: 'k-5' } }, 'from a child');
    const [first, second] = lines();
    expect(first).toMatchObject({ msg: 'with a template', count: 2, template: { name: 'kept', secrets: '[redacted]', credentials: '[redacted]', apiKey: '[redacted]', api_key: '[redacted]' } });
    expect(second).toMatchObject({ msg: 'from a child', reqId: 'r-1', connection: { slug: 'main', api_key: '[redacted]' } });
    expect(h.logs.join('\n')).not.toMatch(/sk-1|c-2|k-3|k-4|k-5/);
    // What was logged is not changed.
    expect(template.apiKey).toBe('k-3');
  });

  it('keep an error whole while censoring its credential field', () => {
    h.logs.length = 0;
    const error = Object.assign(new Error('upstream refused'), { apiKey: 'k-6' });
    h.app.log.error({ err: error }, 'failed');
    const [line] = lines() as [{ err: { message: string; stack: string; apiKey: string } }];
    expect(line.err).toMatchObject({ message: 'upstream refused', apiKey: '[redacted]' });
    expect(line.err.stack).toContain('upstream refused');
    expect(error.apiKey).toBe('k-6');
  });
});

describe('redactLogFields', () => {
  it('never copies a request to log it: no request property is named like a field it censors', () => {
    // A decoration named `apiKey` made every access line copy the whole request to censor it.
    for (const field of ['secrets', 'credentials', 'apiKey', 'api_key']) expect(h.app.hasRequestDecorator(field), field).toBe(false);
  });

  it('returns the fields themselves when nothing is to be censored', () => {
    const fields = { req: { method: 'POST' }, res: { statusCode: 200 }, responseTime: 3, note: 'plain' };
    expect(redactLogFields(fields)).toBe(fields);
  });

  it('censors inherited fields too, keeping the prototype', () => {
    class Holder {
      get api_key() {
        return 'k-7';
      }
      kind = 'holder';
    }
    const out = redactLogFields({ holder: new Holder() }).holder as Holder;
    expect(out).toBeInstanceOf(Holder);
    expect(out.api_key).toBe('[redacted]');
    expect(out.kind).toBe('holder');
  });
});
