import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { harnessEndpoint } from '../../src/agent/model.ts';
import type { EffectiveLlm } from '../../src/agent/template.ts';
import { AppError } from '../../src/errors.ts';
import { startFakeModel, type FakeModelServer } from '../../src/testing/fake-model.ts';
import { expectError, invokeBody, readJson, startHarness, template, type Harness } from '../support/harness.ts';
import { startUpstream, type Upstream } from '../support/upstream.ts';
import { adminOf, connectionsApi, okJson, type Caller } from './client.ts';

/**
 * Where a project connection's base_url may point (src/agent/connection-address.ts): a project
 * admin chooses it, agentd calls it from a host other projects share, so the host's credentials at
 * a cloud metadata address stay out of reach. Refused addresses need no server: nothing connects.
 */

const KEY = 'sk-project-key-for-addresses-0001';

let upstream: FakeModelServer;
beforeAll(async () => {
  upstream = await startFakeModel();
});
afterAll(async () => upstream.close());
beforeEach(() => upstream.reset());

const agent = (slug: string) => ({
  instructions: { agents_md: 'You are a test agent.' },
  llm: { connection: { mode: 'project', slug } },
  tools: [],
  runner: { permissions: { default: 'allow' } },
});
const run = (h: Harness, slug: string) => h.invoke(invokeBody([{ role: 'user', content: 'hi' }], agent(slug)));
const create = (h: Harness, as: Caller, body: Record<string, unknown>) => connectionsApi(h, 'POST', '', { as, body: { api_key: KEY, model: 'm', ...body } });
const named = (url: string) => url.replace('127.0.0.1', 'localhost');

describe('connection base URLs, by default', () => {
  let h: Harness;
  let admin: Caller;
  let redirecting: Upstream;
  beforeAll(async () => {
    h = await startHarness();
    admin = await adminOf(h);
    // Answers every call with a redirect to the cloud metadata address.
    redirecting = await startUpstream((_req, res) => res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data/' }).end());
  });
  afterAll(async () => {
    redirecting.close();
    await h.close();
  });

  it('refuse a link-local or cloud metadata base_url, in every form, with a 400 naming base_url and the setting; nothing is stored', async () => {
    const first = await expectError(await create(h, admin, { slug: 'meta', provider: 'openai-compatible', base_url: 'http://169.254.169.254/latest/meta-data/' }), 400, 'invalid-request');
    expect(first.status.message).toBe(
      "base_url: its host 169.254.169.254 is a link-local address, where cloud metadata services hand out this host's credentials and no model server lives; agentd connects there only when AGENTD_CONNECTION_ALLOWED_HOSTS names the address or a range holding it",
    );
    for (const [base_url, what] of [
      ['http://2852039166/v1', 'a link-local address'],
      ['http://[::ffff:169.254.169.254]/v1', 'a link-local address'],
      ['http://[64:ff9b::169.254.169.254]/v1', 'a link-local address'],
      ['http://[2002:a9fe:a9fe::1]/v1', 'a link-local address'],
      ['https://[fe80::1]/v1', 'a link-local address'],
      ['http://[fd00:ec2::254]/v1', 'the AWS instance metadata service (IPv6)'],
      ['http://100.100.100.200/v1', 'the Alibaba Cloud metadata service'],
    ] as const) {
      for (const provider of ['openai', 'anthropic', 'ollama', 'openai-compatible']) {
        await expectError(await create(h, admin, { slug: 'meta', provider, base_url }), 400, 'invalid-request', `base_url: its host ${new URL(base_url).hostname} is ${what}, where`);
      }
    }
    const { body } = await okJson(await connectionsApi(h, 'GET', '', { as: admin }));
    expect(body.connections).toEqual([]);
  });

  it('allow a model server on the loopback address, as the address or by name: a sidecar', async () => {
    for (const [slug, base_url] of [
      ['sidecar', upstream.url],
      ['sidecar-named', named(upstream.url)],
    ]) {
      await okJson(await create(h, admin, { slug, provider: 'openai-compatible', base_url }), 201);
      upstream.script({ text: `from ${slug}` });
      expect((await readJson(await run(h, slug!))).data.outputs.messages.at(-1).content).toBe(`from ${slug}`);
    }
    expect(upstream.requests).toHaveLength(2);
  });

  it('refuse a connection stored with such a base_url (before agentd checked them) before its turn starts, naming it', async () => {
    for (const provider of ['openai', 'anthropic', 'ollama', 'openai-compatible'] as const) {
      const slug = `stored-${provider}`;
      await h.store.connections.create(h.projectId, { slug, provider, base_url: 'http://[::ffff:a9fe:a9fe]/v1', api_key: KEY, model: 'm' });
      await expectError(await run(h, slug), 400, 'invalid-request', `the base_url of connection "${slug}": its host [::ffff:a9fe:a9fe] is a link-local address`);
    }
    expect(h.model.requests).toHaveLength(0);
  });

  it('refuse such a base_url for a coding-agent harness too, before its process starts (its relay checks the names)', () => {
    const connection = { slug: 'old', provider: 'anthropic' as const, base_url: 'http://169.254.169.254', api_key: KEY };
    const llm: EffectiveLlm = { provider: 'anthropic', model: 'm', connection: { mode: 'project', slug: 'old' }, extras: {} };
    const refused = (() => {
      try {
        harnessEndpoint(llm, ['anthropic'], h.config, {}, connection);
      } catch (error) {
        return error;
      }
    })();
    expect(refused).toBeInstanceOf(AppError);
    expect(refused).toMatchObject({ type: 'invalid-request', message: expect.stringMatching(/^the base_url of connection "old": its host 169\.254\.169\.254 is a link-local address/) });
    expect(harnessEndpoint(llm, ['anthropic'], h.config, {}, { ...connection, base_url: upstream.url }).baseUrl).toBe(upstream.url.replace(/\/v1$/, ''));
  });

  it('refuse a redirect to a refused address: every connection a connection’s call opens is checked', async () => {
    for (const provider of ['openai', 'openai-compatible'] as const) {
      const slug = `redirected-${provider}`;
      await okJson(await create(h, admin, { slug, provider, base_url: redirecting.url }), 201);
      const seen = redirecting.seen.length;
      await expectError(await run(h, slug), 400, 'invalid-request', `the base_url of connection "${slug}": "169.254.169.254" is a link-local address`);
      expect(redirecting.seen.length).toBeGreaterThan(seen);
    }
  });
});

describe('AGENTD_CONNECTION_ALLOWED_HOSTS', () => {
  let ranges: Harness;
  let names: Harness;
  beforeAll(async () => {
    [ranges, names] = await Promise.all([startHarness({ env: { AGENTD_CONNECTION_ALLOWED_HOSTS: '10.0.0.0/8' } }), startHarness({ env: { AGENTD_CONNECTION_ALLOWED_HOSTS: 'localhost' } })]);
  });
  afterAll(async () => {
    await Promise.all([ranges?.close(), names?.close()]);
  });

  it('refuses at creation an address the list does not hold', async () => {
    for (const h of [ranges, names]) {
      await expectError(await create(h, await adminOf(h), { slug: 'loop', provider: 'openai', base_url: upstream.url }), 400, 'invalid-request', 'base_url: its host 127.0.0.1 is an address that AGENTD_CONNECTION_ALLOWED_HOSTS does not hold; the operator may add it there');
    }
  });

  it('refuses, when a turn connects, a host name that resolves outside the list: nothing reaches the server', async () => {
    await okJson(await create(ranges, await adminOf(ranges), { slug: 'named', provider: 'openai-compatible', base_url: named(upstream.url) }), 201);
    await expectError(
      await run(ranges, 'named'),
      400,
      'invalid-request',
      'the base_url of connection "named": "localhost" resolves to an address that AGENTD_CONNECTION_ALLOWED_HOSTS does not hold, and the list does not name the host',
    );
    expect(upstream.requests).toHaveLength(0);
  });

  it('allows a listed host name', async () => {
    await okJson(await create(names, await adminOf(names), { slug: 'named', provider: 'openai', base_url: named(upstream.url) }), 201);
    upstream.script({ text: 'listed' });
    expect((await readJson(await run(names, 'named'))).data.outputs.messages.at(-1).content).toBe('listed');
  });

  it("leaves the operator's own URLs alone: a turn without a connection reaches OPENAI_BASE_URL on the loopback", async () => {
    ranges.model.script({ text: 'operator' });
    expect((await readJson(await ranges.invoke(invokeBody([{ role: 'user', content: 'hi' }], template())))).data.outputs.messages.at(-1).content).toBe('operator');
  });
});
