import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { once } from 'node:events';

const ROOT = path.resolve(import.meta.dirname, '../..');
export const AGENTD_BIN = path.join(ROOT, 'bin/agentd.js');

/** `agentd <args>` as a child process, collecting its output. */
/** `env` adds to this process's environment; an `undefined` value leaves that variable out. */
export function runAgentd(args: string[], env: Record<string, string | undefined>, nodeArgs: string[] = []): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [...nodeArgs, AGENTD_BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return { child, output: () => output, exited };
}

export interface CommandRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A client command (`agentd invoke …`) run to its end, `stdin` as its input. */
export function agentdCommand(args: string[], env: Record<string, string | undefined>, stdin = ''): Promise<CommandRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [AGENTD_BIN, ...args], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.stdin.end(stdin);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Starts `agentd serve` on a free port and resolves once it listens, with its URL. A start the
 * machine slows down says which step it is in (src/cli/start-steps.ts); one that never ends is
 * given up on well after that.
 */
export async function startServe(env: Record<string, string | undefined>, nodeArgs: string[] = []): Promise<ReturnType<typeof runAgentd> & { url: string }> {
  const run = runAgentd(['serve', '--port', '0'], env, nodeArgs);
  const started = Date.now();
  for (;;) {
    const match = /"url":"(http:\/\/[^"]+)"/.exec(run.output());
    if (match) return { ...run, url: match[1]! };
    const { exitCode, signalCode } = run.child;
    if (exitCode !== null || signalCode !== null || Date.now() - started > 45_000) {
      run.child.kill('SIGKILL');
      const how = exitCode !== null ? `exited with ${exitCode}` : signalCode !== null ? `was killed by ${signalCode}` : 'was still starting';
      throw new Error(`agentd serve did not start: after ${Date.now() - started} ms it ${how}; its output:\n${run.output()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The project id and API key a first start prints once. */
export function firstStartCredentials(output: string): { projectId: string; key: string } {
  const projectId = /project id: (\S+)/.exec(output)?.[1];
  const key = /API key: +(agd_\S+)/.exec(output)?.[1];
  if (!projectId || !key) throw new Error(`no first-start credentials in:\n${output}`);
  return { projectId, key };
}

/** POSTs JSON to a child server with the key and project id filled in. */
export function postJson(url: string, route: string, auth: { projectId: string; key: string }, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${url}${route}?project_id=${auth.projectId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `ApiKey ${auth.key}`, ...headers },
    body: JSON.stringify(body),
  });
}

/** A JSON call on a child server's `/api` surface that must succeed (its body says why when not). */
export async function apiCall(url: string, auth: { projectId: string; key: string }, method: string, route: string, body?: unknown): Promise<any> {
  const res = await fetch(`${url}/api${route}?project_id=${auth.projectId}`, {
    method,
    headers: { authorization: `ApiKey ${auth.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
  return res.json();
}
