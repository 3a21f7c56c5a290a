import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tlsFailure } from '../../src/tls-failure.ts';
import { expectError, invokeBody, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * A model provider or MCP server whose TLS fails says which way, and what to do, instead of
 * OpenSSL's words or "could not be reached". The certificate (test/support/tls/) is self-signed,
 * for agentd-test.invalid, and trusted by nothing but the tests that pass it as their CA.
 */
const TLS_DIR = path.join(import.meta.dirname, '../support/tls');
const cert = readFileSync(path.join(TLS_DIR, 'cert.pem'));
const key = readFileSync(path.join(TLS_DIR, 'key.pem'));

let secure: HttpsServer;
let plain: HttpServer;
let h: Harness;
const portOf = (server: HttpServer | HttpsServer) => (server.address() as AddressInfo).port;

beforeAll(async () => {
  secure = createHttpsServer({ cert, key }, (_req, res) => res.end('{}'));
  plain = createHttpServer((_req, res) => res.end('{}'));
  await Promise.all([secure, plain].map((server) => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))));
  // The model's base URL is read per turn from the template's provider; the harness's own points at the secure server.
  h = await startHarness({ env: { OPENAI_BASE_URL: `https://127.0.0.1:${portOf(secure)}/v1` } });
});
afterAll(async () => {
  await h.close();
  await Promise.all([secure, plain].map((server) => new Promise((resolve) => server.close(resolve))));
});

/** The error a TLS connection to the secure server ends with, as Node makes it. */
function handshake(options: tls.ConnectionOptions): Promise<Error | undefined> {
  return new Promise((resolve) => {
    const socket = tls.connect({ host: '127.0.0.1', port: portOf(secure), ...options }, () => {
      socket.end();
      resolve(undefined);
    });
    socket.once('error', resolve);
  });
}

describe('a TLS failure, in words', () => {
  it('names a certificate nothing trusts, one for another name, and a server that speaks no TLS', async () => {
    expect(tlsFailure(await handshake({ servername: 'agentd-test.invalid' }))).toBe(
      "has a TLS certificate agentd does not trust (self-signed certificate, DEPTH_ZERO_SELF_SIGNED_CERT): if your own CA signed it, start agentd with NODE_EXTRA_CA_CERTS naming that CA's PEM file",
    );
    expect(tlsFailure(await handshake({ ca: cert, servername: 'localhost' }))).toMatch(
      /^has a TLS certificate for another name \(Hostname\/IP does not match certificate's altnames: .*, ERR_TLS_CERT_ALTNAME_INVALID\): use a URL with a host name the certificate names$/,
    );
    expect(await handshake({ ca: cert, servername: 'agentd-test.invalid' })).toBeUndefined();
    const notTls = await new Promise<Error>((resolve) => tls.connect({ host: '127.0.0.1', port: portOf(plain) }).once('error', resolve));
    expect(tlsFailure(notTls)).toMatch(/^does not speak TLS at that address \(ERR_SSL_[A-Z_]+\): if it serves plain HTTP there, use an http:\/\/ URL$/);
    expect(tlsFailure(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' }))).toBeUndefined();
  });
});

describe('a turn whose model provider fails TLS', () => {
  it('is a 502 saying the certificate is not trusted, and how to trust it', async () => {
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template()));
    await expectError(res, 502, 'upstream-error', /^the model provider at 127\.0\.0\.1:\d+ has a TLS certificate agentd does not trust \(self-signed certificate, DEPTH_ZERO_SELF_SIGNED_CERT\): .*NODE_EXTRA_CA_CERTS/);
  });
});

describe('an MCP server whose TLS fails', () => {
  const turn = (url: string) => h.invoke(invokeBody([{ role: 'user', content: 'hi' }], { ...template(), mcps: [{ name: 'docs', connection: { type: 'http', url } }] }));

  it('over a certificate nothing trusts is a 424 that says so', async () => {
    const url = `https://127.0.0.1:${portOf(secure)}/mcp`;
    await expectError(await turn(url), 424, 'mcp-unavailable', `MCP server "docs" at ${url} has a TLS certificate agentd does not trust (self-signed certificate, DEPTH_ZERO_SELF_SIGNED_CERT)`);
  });

  it('over https:// to a server of plain HTTP is a 424 that says to use http://', async () => {
    const url = `https://127.0.0.1:${portOf(plain)}/mcp`;
    await expectError(await turn(url), 424, 'mcp-unavailable', new RegExp(`^MCP server "docs" at ${url.replaceAll('.', '\\.')} does not speak TLS at that address \\(ERR_SSL_[A-Z_]+\\): if it serves plain HTTP there, use an http:// URL$`));
  });
});
