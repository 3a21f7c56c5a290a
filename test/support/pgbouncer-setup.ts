import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';

/**
 * The `pgbouncer` test project's global setup: PgBouncer in transaction mode in front of the
 * PostgreSQL server the suite uses, as docs/deployment.md tells operators to run it. Every
 * database name is passed through to the server; the replica tests then reach their database
 * through it, and LISTEN directly (test/support/database.ts).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = new URL(process.env.AGENTD_TEST_DATABASE_URL!);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-pgbouncer-'));
  const port = await freePort();
  await writeFile(path.join(dir, 'users.txt'), `"${decodeURIComponent(server.username || 'postgres')}" ""\n`);
  await writeFile(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      'max_client_conn = 1000',
      'default_pool_size = 20',
      'ignore_startup_parameters = extra_float_digits',
      '',
    ].join('\n'),
  );
  // PgBouncer refuses to run as root; as another user it must be able to read its folder.
  const asRoot = process.getuid?.() === 0;
  const child = spawn(process.env.AGENTD_TEST_PGBOUNCER ?? 'pgbouncer', [...(asRoot ? ['-u', 'nobody'] : []), path.join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const failed = new Promise<never>((_, reject) => {
    child.once('error', (error) => reject(new Error(`pgbouncer could not start (${error.message}); install it (Debian: apt install pgbouncer)`)));
    child.once('exit', (code) => reject(new Error(`pgbouncer exited with ${code}: ${stderr.trim()}`)));
  });
  await Promise.race([listening(port), failed]);
  const url = new URL(server);
  url.port = String(port);
  project.provide('pgbouncerUrl', url.toString());
  return async () => {
    child.kill('SIGTERM');
    await rm(dir, { recursive: true, force: true });
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

async function listening(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`pgbouncer did not listen on port ${port}`);
}

declare module 'vitest' {
  export interface ProvidedContext {
    pgbouncerUrl: string;
  }
}
