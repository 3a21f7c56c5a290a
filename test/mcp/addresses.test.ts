import { describe, expect, it } from 'vitest';
import { allowedHosts, McpAddresses } from '../../src/agent/mcp-address.ts';
import { connectMcpServers, type ConnectOptions, type McpTools } from '../../src/agent/mcp.ts';
import type { McpServer } from '../../src/contract/template.ts';
import { AppError } from '../../src/errors.ts';
import { mcpServersPerFile } from '../support/mcp-server.ts';

/**
 * Where agentd connects to a template's MCP servers (src/agent/mcp-address.ts). Refused addresses
 * need no server: the refusal comes before any connection, and the connect deadline is longer than
 * the test's, so an attempt would fail the test by timing out rather than pass as a 424.
 */

const OPTS: ConnectOptions = { allowStdio: false, timeoutMs: 60_000 };

const { servers, opened } = mcpServersPerFile();

const server = (url: string, type: 'http' | 'sse' = 'http'): McpServer => ({ name: 'calc', connection: { type, url } });

async function connect(url: string, opts: Partial<ConnectOptions> = {}, type: 'http' | 'sse' = 'http'): Promise<McpTools> {
  const mcp = await connectMcpServers([server(url, type)], { ...OPTS, ...opts });
  opened.push(mcp);
  return mcp;
}

async function refusal(url: string, opts: Partial<ConnectOptions> = {}, type: 'http' | 'sse' = 'http'): Promise<AppError> {
  const error = await connect(url, opts, type).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).type).toBe('invalid-request');
  expect((error as AppError).message).toMatch(/^data\.parameters\.agent\.mcps\[0\]\.connection\.url: /);
  return error as AppError;
}

const only = (...entries: string[]) => ({ addresses: new McpAddresses(allowedHosts(entries.join(','))) });
const port = (url: string) => new URL(url).port;

describe('MCP server addresses, by default', () => {
  it('connect to a server on the loopback address (a sidecar on the same host)', async () => {
    const mcp = await connect(servers.http.url);
    expect(Object.keys(mcp.tools)).toContain('calc__add');
    const viaSse = await connect(servers.sse.url, {}, 'sse');
    expect(Object.keys(viaSse.tools)).toContain('calc__add');
  });

  it('refuse the link-local metadata address with a 400 naming the field, the reason and the setting, before connecting', async () => {
    const error = await refusal('http://169.254.169.254/latest/meta-data/');
    expect(error.message).toBe(
      'data.parameters.agent.mcps[0].connection.url: its host 169.254.169.254 is a link-local address, where cloud metadata services hand out this host\'s credentials and no MCP server lives; agentd connects there only when AGENTD_MCP_ALLOWED_HOSTS names the address or a range holding it',
    );
    await refusal('http://169.254.169.254/sse', {}, 'sse');
  });

  it('refuse the link-local and metadata addresses in every form the URL parser reads', async () => {
    for (const url of [
      'http://2852039166/mcp',
      'http://0xa9fea9fe/mcp',
      'http://0251.0376.0251.0376/mcp',
      'http://169.254.43518/mcp',
      'http://[::ffff:169.254.169.254]/mcp',
      'http://[::ffff:a9fe:a9fe]/mcp',
      'http://[0:0:0:0:0:ffff:169.254.169.254]/mcp',
      'http://[fe80::a9fe:a9fe]/mcp',
      'http://169.254.170.2/v2/credentials',
      // NAT64's well-known prefix and 6to4 carry an IPv4 address that a translator or relay reaches.
      'http://[64:ff9b::169.254.169.254]/mcp',
      'http://[64:ff9b::a9fe:a9fe]/mcp',
      'http://[0064:ff9b:0:0:0:0:a9fe:a9fe]/mcp',
      'http://[2002:a9fe:a9fe::]/mcp',
      'http://[2002:a9fe:a9fe:1::1]/mcp',
    ]) {
      expect((await refusal(url)).message, url).toContain('is a link-local address');
    }
    for (const [url, what] of [
      ['http://[fd00:ec2::254]/latest/meta-data/', 'the AWS instance metadata service (IPv6)'],
      ['http://[FD00:EC2:0::254]/', 'the AWS instance metadata service (IPv6)'],
      ['http://[::ffff:100.100.100.200]/', 'the Alibaba Cloud metadata service'],
      ['http://100.100.100.200/latest/meta-data/', 'the Alibaba Cloud metadata service'],
      ['http://192.0.0.192/latest/', 'the Oracle Cloud metadata service'],
      ['http://168.63.129.16/machine', "Azure's WireServer"],
      ['http://[fd20:ce::254]/', 'the Google Cloud metadata server (IPv6)'],
      ['http://[fd00:a9fe:a9fe::1]/', 'the Akamai (Linode) metadata service (IPv6)'],
      ['http://[64:ff9b::100.100.100.200]/', 'the Alibaba Cloud metadata service'],
      ['http://[2002:a83f:8110::]/', "Azure's WireServer"],
    ] as const) {
      expect((await refusal(url)).message, url).toContain(`is ${what}, where`);
    }
  });

  it('refuse a host name that resolves to a refused address: the check holds on the address connected to', () => {
    const addresses = new McpAddresses(undefined);
    expect(addresses.refusal('metadata.google.internal', '169.254.169.254', '"metadata.google.internal"')).toMatch(/^"metadata\.google\.internal" resolves to a link-local address/);
    expect(addresses.refusal('rebound.example', '::ffff:169.254.169.254', '"rebound.example"')).toMatch(/resolves to a link-local address/);
    expect(addresses.refusal('nat64.example', '64:ff9b::a9fe:a9fe', '"nat64.example"')).toMatch(/resolves to a link-local address/);
    expect(addresses.refusal('6to4.example', '2002:a9fe:a9fe::1', '"6to4.example"')).toMatch(/resolves to a link-local address/);
    expect(addresses.refusal('sidecar', '127.0.0.1', '"sidecar"')).toBeUndefined();
    expect(addresses.refusal('lan', '10.1.2.3', '"lan"')).toBeUndefined();
  });
});

describe('AGENTD_MCP_ALLOWED_HOSTS', () => {
  it('refuses the loopback address when set without it, and a name that resolves there, before connecting', async () => {
    const before = servers.http.requests.length;
    expect((await refusal(servers.http.url, only('mcp.example.com'))).message).toContain(
      'its host 127.0.0.1 is an address that AGENTD_MCP_ALLOWED_HOSTS does not hold; the operator may add it there',
    );
    expect((await refusal(`http://localhost:${port(servers.http.url)}/mcp`, only('mcp.example.com'))).message).toContain(
      'its host localhost is a host AGENTD_MCP_ALLOWED_HOSTS does not name',
    );
    // With ranges in the list, a name is judged by what it resolves to: refused at the lookup, still a 400.
    expect((await refusal(`http://localhost:${port(servers.http.url)}/mcp`, only('10.0.0.0/8'))).message).toContain(
      '"localhost" resolves to an address that AGENTD_MCP_ALLOWED_HOSTS does not hold, and the list does not name the host',
    );
    expect((await refusal(`http://localhost:${port(servers.sse.url)}/sse`, only('10.0.0.0/8'), 'sse')).message).toContain('"localhost" resolves to');
    expect(servers.http.requests.length).toBe(before);
  });

  it('allows a listed host: by address, by range, by name and by wildcard', async () => {
    for (const opts of [only('127.0.0.1'), only('127.0.0.0/8'), only('::1', '127.0.0.1/32')]) {
      expect(Object.keys((await connect(servers.http.url, opts)).tools)).toContain('calc__add');
    }
    expect(Object.keys((await connect(`http://localhost:${port(servers.http.url)}/mcp`, only('localhost'))).tools)).toContain('calc__add');
    expect(Object.keys((await connect(`http://localhost:${port(servers.http.url)}/mcp`, only('127.0.0.1', '::1'))).tools)).toContain('calc__add');
    expect(Object.keys((await connect(`http://localhost:${port(servers.sse.url)}/sse`, only('localhost'), 'sse')).tools)).toContain('calc__add');
    const wildcard = new McpAddresses(allowedHosts('*.mcp.internal'));
    expect(wildcard.refusal('calc.mcp.internal', '10.0.0.5', 'x')).toBeUndefined();
    expect(wildcard.refusal('mcp.internal', '10.0.0.5', 'x')).toContain('does not hold');
  });

  it('a listed name never opens a refused address; an address entry holding it does', () => {
    expect(new McpAddresses(['metadata.google.internal']).refusal('metadata.google.internal', '169.254.169.254', 'x')).toContain('link-local');
    expect(new McpAddresses(['169.254.169.254']).refusal('169.254.169.254', '169.254.169.254', 'x')).toBeUndefined();
    expect(new McpAddresses(['fd00:ec2::/32']).refusal('fd00:ec2::254', 'fd00:ec2::254', 'x')).toBeUndefined();
  });

  it('reads an IPv4 address carried in NAT64 or 6to4 as that address, against the list as well', () => {
    const lan = new McpAddresses(allowedHosts('10.0.0.0/8'));
    for (const carried of ['::ffff:10.0.0.5', '64:ff9b::a00:5', '2002:a00:5::1']) expect(lan.refusal(carried, carried, 'x'), carried).toBeUndefined();
    // Outside the well-known /96 (or not 2002::/16) no IPv4 address is carried: an IPv6 address, judged as one.
    for (const other of ['64:ff9b:1::a00:5', '2003:a00:5::1']) expect(lan.refusal(other, other, 'x'), other).toContain('does not hold');
  });

  it('is read at start, and an entry it cannot read stops the server, naming it', () => {
    expect(allowedHosts(undefined)).toBeUndefined();
    expect(allowedHosts(' , ')).toBeUndefined();
    expect(allowedHosts('MCP.example.com, *.internal ,10.0.0.0/8,[::1], fd00::/8')).toEqual(['mcp.example.com', '*.internal', '10.0.0.0/8', '[::1]', 'fd00::/8']);
    for (const bad of ['10.0.0.0/33', 'http://mcp.example.com', '*', 'mcp.example.com:8080', '::1/129', '10.0.0.0/x']) {
      expect(() => allowedHosts(bad), bad).toThrow(`AGENTD_MCP_ALLOWED_HOSTS: "${bad}" is not a host name`);
    }
  });
});
