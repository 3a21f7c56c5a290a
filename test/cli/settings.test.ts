import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { agentdCommand } from '../support/child-server.ts';

/**
 * README's configuration table: each setting is read with its documented default, and a value
 * the server cannot honour stops the start with a message naming the setting (`agentd serve`
 * prints it as `agentd: …` and exits 2), not a server that misbehaves later.
 */
describe('the settings agentd serve reads', () => {
  it('has the defaults README documents', () => {
    const config = loadConfig({ OPENAI_API_KEY: 'sk-x' });
    expect(config).toMatchObject({
      port: 8787, host: '127.0.0.1', databaseUrl: undefined, pgPoolSize: 10, pgBounds: { connectTimeoutMs: 10_000, statementTimeoutMs: 30_000 }, databaseListenUrl: undefined, evalPollMs: 1000, secretKey: undefined,
      maxBodyBytes: 10_485_760, requestTimeoutMs: 120_000, maxUploadBytes: 10_485_760, maxAttachments: 100, corsOrigins: undefined, debug: false,
      logLevel: 'info', metrics: undefined, shutdownGraceMs: 30_000, leaseTtlMs: 15_000, turnWorkers: Math.min(os.availableParallelism() - 1, 4),
      turnWorkersLoad: 0.9, maxSteps: 50, modelTimeoutMs: 120_000, streamHoldMs: 10_000, harnessMaxProcesses: 8, harnesses: ['claude', 'codex', 'pi'],
      harnessParkMs: 120_000, turnTimeoutMs: 1_800_000, modelMaxRetries: 0,
      bash: { timeoutMs: 60_000, maxOutputBytes: 65_536, unsafeHost: false, limits: { processes: 256, memoryBytes: 1024 * 1024 * 1024 } },
      allowStdioMcp: false, mcp: { connectTimeoutMs: 10_000, callTimeoutMs: 120_000, allowedHosts: undefined }, connections: { allowedHosts: undefined }, defaultLlm: { provider: 'openai', model: 'gpt-5-mini' },
      openaiCompatible: {}, prices: {}, otlp: undefined,
    });
    expect(config.dataDir).toBe(`${process.cwd()}/.agentd`);
  });

  it('stops agentd serve with one line naming the setting, exit status 2, before anything is opened', async () => {
    const run = await agentdCommand(['serve', '--port', '0'], { AGENTD_DATA_DIR: '/nonexistent/agentd', AGENTD_TURN_TIMEOUT_MS: '3000000000' });
    expect(run).toEqual({ code: 2, stdout: '', stderr: 'agentd: AGENTD_TURN_TIMEOUT_MS must be a whole number of milliseconds from 1 to 2147483647 (about 24.8 days), got "3000000000"\n' });
  });

  it('stops agentd serve with one line, exit status 1, when its data folder cannot be made or its database cannot be reached', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-settings-'));
    try {
      await writeFile(path.join(dir, 'a-file'), '');
      const folder = await agentdCommand(['serve', '--port', '0'], { AGENTD_DATA_DIR: path.join(dir, 'a-file', 'data') });
      expect(folder).toMatchObject({ code: 1, stdout: '' });
      expect(folder.stderr).toMatch(new RegExp(`^agentd: cannot start: ENOTDIR: not a directory, .*a-file/data.*\n$`));
      const database = await agentdCommand(['serve', '--port', '0'], { AGENTD_DATA_DIR: dir, DATABASE_URL: 'postgres://agentd:hunter2@127.0.0.1:1/agentd' });
      expect(database).toEqual({ code: 1, stdout: '', stderr: expect.stringMatching(/^agentd: cannot start: cannot open the database at postgres:\/\/agentd:\*\*\*@127\.0\.0\.1:1\/agentd: .*ECONNREFUSED.*\n$/) });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reads AGENTD_MCP_ALLOWED_HOSTS as a list of host names, wildcards, addresses and ranges, and stops at an entry it cannot read', () => {
    expect(loadConfig({ AGENTD_MCP_ALLOWED_HOSTS: '' }).mcp.allowedHosts).toBeUndefined();
    expect(loadConfig({ AGENTD_MCP_ALLOWED_HOSTS: 'mcp.internal, *.tools.example.com,127.0.0.1, 10.0.0.0/8 ,::1' }).mcp.allowedHosts).toEqual([
      'mcp.internal',
      '*.tools.example.com',
      '127.0.0.1',
      '10.0.0.0/8',
      '::1',
    ]);
    expect(() => loadConfig({ AGENTD_MCP_ALLOWED_HOSTS: 'mcp.internal,https://mcp.internal/mcp' })).toThrow(
      'AGENTD_MCP_ALLOWED_HOSTS: "https://mcp.internal/mcp" is not a host name (mcp.example.com), a wildcard (*.example.com), an address (10.0.0.5, ::1) or a CIDR range (10.0.0.0/8, fd00::/8)',
    );
  });

  it('reads AGENTD_CONNECTION_ALLOWED_HOSTS as AGENTD_MCP_ALLOWED_HOSTS, on its own', () => {
    expect(loadConfig({ AGENTD_CONNECTION_ALLOWED_HOSTS: ' , ' }).connections.allowedHosts).toBeUndefined();
    const config = loadConfig({ AGENTD_CONNECTION_ALLOWED_HOSTS: 'LLM.internal, *.models.example.com, 10.0.0.0/8,[fd00::1]', AGENTD_MCP_ALLOWED_HOSTS: 'mcp.internal' });
    expect(config.connections.allowedHosts).toEqual(['llm.internal', '*.models.example.com', '10.0.0.0/8', '[fd00::1]']);
    expect(config.mcp.allowedHosts).toEqual(['mcp.internal']);
    expect(() => loadConfig({ AGENTD_CONNECTION_ALLOWED_HOSTS: 'http://llm.internal/v1' })).toThrow(
      'AGENTD_CONNECTION_ALLOWED_HOSTS: "http://llm.internal/v1" is not a host name (llm.example.com), a wildcard (*.example.com), an address (10.0.0.5, ::1) or a CIDR range (10.0.0.0/8, fd00::/8)',
    );
  });

  it('listens on 127.0.0.1:8787 unless told otherwise; an empty HOST is unset, not every interface', () => {
    expect(loadConfig({})).toMatchObject({ host: '127.0.0.1', port: 8787 });
    expect(loadConfig({ HOST: '' }).host).toBe('127.0.0.1');
    expect(loadConfig({ HOST: '0.0.0.0', PORT: '0' })).toMatchObject({ host: '0.0.0.0', port: 0 });
    for (const bad of ['65536', '70000', '-1', '80.5', 'http']) {
      expect(() => loadConfig({ PORT: bad })).toThrow(`PORT must be a port number from 0 to 65535, got "${bad}"`);
    }
  });

  it('refuses a time longer than a timer holds (it would end at once) or a limit of 0 that fails every call', () => {
    const times = ['AGENTD_PG_CONNECT_TIMEOUT_MS', 'AGENTD_PG_STATEMENT_TIMEOUT_MS', 'AGENTD_EVAL_POLL_MS', 'AGENTD_REQUEST_TIMEOUT_MS', 'AGENTD_SHUTDOWN_GRACE_MS', 'AGENTD_LEASE_TTL_MS', 'AGENTD_MODEL_TIMEOUT_MS', 'AGENTD_STREAM_HOLD_MS', 'AGENTD_TURN_TIMEOUT_MS', 'AGENTD_HARNESS_PARK_MS', 'AGENTD_BASH_TIMEOUT_MS', 'AGENTD_MCP_TIMEOUT_MS', 'AGENTD_MCP_CALL_TIMEOUT_MS'];
    for (const name of times) {
      expect(() => loadConfig({ [name]: '3000000000' }), name).toThrow(new RegExp(`^${name} must be a whole number of milliseconds from [01] to 2147483647 \\(about 24.8 days\\), got "3000000000"$`));
      expect(loadConfig({ [name]: '2147483647' }), name).toBeDefined();
    }
    for (const name of ['AGENTD_MODEL_TIMEOUT_MS', 'AGENTD_TURN_TIMEOUT_MS', 'AGENTD_BASH_TIMEOUT_MS', 'AGENTD_MCP_TIMEOUT_MS', 'AGENTD_MCP_CALL_TIMEOUT_MS']) {
      expect(() => loadConfig({ [name]: '0' }), name).toThrow(`${name} must be a whole number of milliseconds from 1 to 2147483647`);
    }
    // 0 means something for these: no wait at all.
    expect(loadConfig({ AGENTD_SHUTDOWN_GRACE_MS: '0', AGENTD_STREAM_HOLD_MS: '0', AGENTD_HARNESS_PARK_MS: '0' })).toMatchObject({ shutdownGraceMs: 0, streamHoldMs: 0, harnessParkMs: 0 });
    const otlp = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };
    for (const name of ['OTEL_EXPORTER_OTLP_TIMEOUT', 'OTEL_BSP_SCHEDULE_DELAY', 'OTEL_BSP_EXPORT_TIMEOUT']) {
      expect(() => loadConfig({ ...otlp, [name]: '3000000000' }), name).toThrow(`${name} must be a whole number of milliseconds`);
    }
  });

  it('refuses AGENTD_MAX_STEPS=0, which ran one step anyway', () => {
    expect(loadConfig({ AGENTD_MAX_STEPS: '1' }).maxSteps).toBe(1);
    for (const bad of ['0', '-3', '2.5', 'many']) expect(() => loadConfig({ AGENTD_MAX_STEPS: bad }), bad).toThrow(`AGENTD_MAX_STEPS must be a whole number of 1 or more, got "${bad}"`);
  });

  it('holds AGENTD_OPENAI_COMPATIBLE and AGENTD_PRICES to their shapes: null stopped the start with a TypeError, a price in words made every cost null', () => {
    expect(loadConfig({})).toMatchObject({ openaiCompatible: {}, prices: {} });
    const endpoints = { vllm: { base_url: 'http://127.0.0.1:8000/v1', api_key_env: 'VLLM_API_KEY' } };
    expect(loadConfig({ AGENTD_OPENAI_COMPATIBLE: JSON.stringify(endpoints) }).openaiCompatible).toEqual(endpoints);
    expect(loadConfig({ AGENTD_PRICES: '{"openai/gpt-5-mini": {"input": 0.25, "output": 2}}' }).prices).toEqual({ 'openai/gpt-5-mini': { input: 0.25, output: 2 } });
    for (const bad of ['null', '[]', '"vllm"', '{"vllm": "http://127.0.0.1:8000/v1"}', '{"vllm": {"base_url": "127.0.0.1:8000"}}', '{"vllm": {"base_url": "ftp://h/v1"}}', '{"vllm": {"base_url": "http://h/v1", "api_key_env": 1}}']) {
      expect(() => loadConfig({ AGENTD_OPENAI_COMPATIBLE: bad }), bad).toThrow(/^AGENTD_OPENAI_COMPATIBLE is not as agentd reads it.*; write it as \{"vllm": \{"base_url"/);
    }
    expect(() => loadConfig({ AGENTD_OPENAI_COMPATIBLE: '{"vllm": {"base_url": "127.0.0.1"}}' })).toThrow(/at vllm\.base_url/);
    for (const bad of ['null', '5', '{"m": "cheap"}', '{"m": {"input": "1", "output": 2}}', '{"m": {"input": 1}}', '{"m": {"input": -1, "output": 2}}']) {
      expect(() => loadConfig({ AGENTD_PRICES: bad }), bad).toThrow(/^AGENTD_PRICES is not as agentd reads it.*; write it as \{"openai\/gpt-5-mini"/);
    }
    expect(() => loadConfig({ AGENTD_PRICES: '{m: 1}' })).toThrow('AGENTD_PRICES must be JSON, e.g. {"openai/gpt-5-mini": {"input": 0.25, "output": 2}}');
  });

  it('refuses a default provider it does not have and a provider address that is no URL, which failed every turn', () => {
    expect(loadConfig({}).defaultLlm).toEqual({ provider: 'demo', model: 'demo' });
    expect(loadConfig({ OPENAI_API_KEY: 'sk-x' }).defaultLlm).toEqual({ provider: 'openai', model: 'gpt-5-mini' });
    expect(loadConfig({ AGENTD_DEFAULT_PROVIDER: 'anthropic', AGENTD_DEFAULT_MODEL: 'claude-sonnet-4-5' }).defaultLlm).toEqual({ provider: 'anthropic', model: 'claude-sonnet-4-5' });
    expect(() => loadConfig({ AGENTD_DEFAULT_PROVIDER: 'gemini' })).toThrow('AGENTD_DEFAULT_PROVIDER must be one of openai, anthropic, ollama, openai-compatible, demo, got "gemini"');
    for (const name of ['OPENAI_BASE_URL', 'ANTHROPIC_BASE_URL', 'OLLAMA_BASE_URL', 'AGENTD_DEMO_MODEL_URL']) {
      expect(() => loadConfig({ [name]: 'user:secret@127.0.0.1:8000' }), name).toThrow(new RegExp(`^${name} must be an http\\(s\\) URL, e.g. http://127.0.0.1:8000/v1$`));
      expect(loadConfig({ [name]: 'http://127.0.0.1:8000' }), name).toBeDefined();
    }
  });

  it('reads a switch as on or off and refuses anything else, which was quietly off', () => {
    expect(loadConfig({})).toMatchObject({ debug: false, allowStdioMcp: false, bash: { unsafeHost: false } });
    expect(loadConfig({ AGENTD_DEBUG: '1', AGENTD_ALLOW_STDIO_MCP: 'true', AGENTD_UNSAFE_HOST_BASH: 'YES' })).toMatchObject({ debug: true, allowStdioMcp: true, bash: { unsafeHost: true } });
    expect(loadConfig({ AGENTD_DEBUG: '0', AGENTD_ALLOW_STDIO_MCP: 'off', AGENTD_UNSAFE_HOST_BASH: '' })).toMatchObject({ debug: false, allowStdioMcp: false, bash: { unsafeHost: false } });
    for (const name of ['AGENTD_DEBUG', 'AGENTD_ALLOW_STDIO_MCP', 'AGENTD_UNSAFE_HOST_BASH']) {
      expect(() => loadConfig({ [name]: 'enabled' }), name).toThrow(`${name} must be 1 (on) or 0 (off), got "enabled"`);
    }
    // OpenTelemetry's own switch is read as its SDKs read it: anything but a true value is false.
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'maybe' }).otlp).toBeDefined();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' }).otlp).toBeUndefined();
  });

  it('refuses a DATABASE_URL of another database at once, without echoing it (it may hold a password)', () => {
    expect(loadConfig({}).databaseUrl).toBeUndefined();
    for (const url of ['sqlite:/tmp/a.db', 'file:/tmp/a.db', 'file:///tmp/a.db', 'postgres://u:p@h:5432/db', 'postgresql://h/db']) expect(loadConfig({ DATABASE_URL: url }).databaseUrl).toBe(url);
    for (const url of ['mysql://u:hunter2@h/db', 'sqlite:', '/tmp/a.db']) {
      expect(() => loadConfig({ DATABASE_URL: url }), url).toThrow(/^DATABASE_URL is not one agentd reads: write sqlite:<path>, file:<path> or postgres:\/\/user:password@host:5432\/db/);
      expect(() => loadConfig({ DATABASE_URL: url })).not.toThrow(/hunter2/);
    }
  });
});
