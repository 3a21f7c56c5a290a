import { parseCommand, portFlag } from './args.ts';
import { buildApp } from '../http/app.ts';
import { bootstrapFirstRun } from '../store/bootstrap.ts';
import { openStore, resolveDatabaseLocation } from '../store/db.ts';
import { echoScript, startFakeModel } from '../testing/fake-model.ts';
import type { Config } from '../config.ts';
import { DEMO_PROVIDER } from '../contract/providers.ts';
import { limitsAvailable } from '../agent/tools/cgroups.ts';
import { removeDeletedFolders } from '../sessions/folders.ts';
import { startSteps } from './start-steps.ts';

const USAGE = `Usage: agentd serve [--port N] [--host ADDR]

Starts the server on the embedded SQLite database in AGENTD_DATA_DIR (default
./.agentd), or on DATABASE_URL when set (behind PgBouncer in transaction mode,
AGENTD_DATABASE_LISTEN_URL names the server itself for the one listening
connection; docs/deployment.md). Migrations run at start. On the first start it
creates the project "default" and prints one API key for it.

  --port N      listen on port N (default PORT or 8787)
  --host ADDR   listen on ADDR (default HOST or 127.0.0.1; 0.0.0.0 for all
                interfaces)
`;

export async function serveCommand(argv: string[], config: Config): Promise<number> {
  const parsed = parseCommand(argv, { port: { type: 'string' }, host: { type: 'string' } }, USAGE);
  if (typeof parsed === 'number') return parsed;
  const { values } = parsed;
  const port = portFlag('serve', values.port, config.port);
  if (port === undefined) return 2;

  const steps = startSteps();
  steps.step(`opening the database at ${resolveDatabaseLocation(config)} (connecting, then migrating)`);
  const store = await openStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, poolSize: config.pgPoolSize, bounds: config.pgBounds, listenUrl: config.databaseListenUrl, secretKey: config.secretKey }).catch(
    (error: unknown) => {
      steps.done();
      // A data folder that cannot be made, a database out of reach, a key file that cannot be
      // read: said in one line, as a setting's mistake is, not as a stack trace. The store's
      // messages name the place and hide a URL's password.
      process.stderr.write(`agentd: cannot start: ${(error as Error).message}\n`);
      return undefined;
    },
  );
  if (!store) return 1;
  // The embedded database has one server: a turn still "running" in it, and its lease, were cut
  // off when the previous process died. On PostgreSQL they may be another replica's.
  if (store.engine === 'sqlite') {
    await store.turns.markRunningAsInterrupted();
    await store.leases.releaseAll();
  }
  await removeDeletedFolders(config.dataDir);
  // No provider configured: the built-in demo model answers, from this process (before the app,
  // whose turn threads take the environment as it is when they start).
  const demo = config.defaultLlm.provider === DEMO_PROVIDER && !config.env.AGENTD_DEMO_MODEL_URL ? await startFakeModel({ script: echoScript, record: false }) : undefined;
  if (demo) config.env.AGENTD_DEMO_MODEL_URL = demo.url;
  steps.step('starting the server and its turn threads');
  const app = await buildApp({ config, store });
  const host = values.host ?? config.host;
  try {
    await app.listen({ port, host });
  } catch (error) {
    const why = listenFailure(error as NodeJS.ErrnoException, host, port);
    // A server that never started has nothing to report on the way down: the one line below says it all.
    if (why) app.log.level = 'silent';
    await app.close();
    await demo?.close();
    await store.close();
    if (!why) throw error;
    process.stderr.write(`agentd: ${why}\n`);
    return 1;
  }
  steps.step('finishing the start on the database (the first project, answering other replicas)');
  // Only now that the port is ours: a first key printed by a start that then failed would be lost.
  const first = await bootstrapFirstRun(store);
  const address = app.server.address();
  const url = typeof address === 'object' && address ? `http://${address.address}:${address.port}` : String(address);

  // A server on every interface is reached from this machine at its loopback address.
  const local = typeof address === 'object' && address ? `http://${['0.0.0.0', '::'].includes(address.address) ? '127.0.0.1' : address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}` : url;
  const banner = ['', `agentd is listening: console ${local}/ · API reference ${local}/docs`];
  if (demo) {
    banner.push(
      'No model provider is configured, so the default model is the built-in demo model: it echoes what you say, and "/tool write {\"path\":\"a.txt\",\"content\":\"hi\"}" makes it call a tool. For a real one, start with OPENAI_API_KEY=… (or ANTHROPIC_API_KEY with AGENTD_DEFAULT_PROVIDER=anthropic).',
    );
  }
  if (first) {
    banner.push(
      'agentd: first start — created project "default".',
      `  project id: ${first.project.id}`,
      `  API key:    ${first.apiKey.key}  (admin: it runs turns and manages keys and connections)`,
      '  The key is shown only this once; keep it: sign in to the console with it. More keys: npm run agentd -- keys create --project NAME',
      `  For the command line: export AGENTD_URL=${local} AGENTD_PROJECT_ID=${first.project.id} AGENTD_API_KEY=${first.apiKey.key}`,
    );
  } else {
    banner.push('  Sign in with a key of your project (the first start printed one); make another with: npm run agentd -- keys create --project default');
  }
  // Printed as soon as the key is stored: a start killed later on (answering followers below
  // waits on the database) must not have stored a key nobody saw.
  process.stdout.write(`${banner.join('\n')}\n\n`);
  const stopSweeping = store.engine === 'postgres' ? app.turns.sweepExpiredLeases(config.leaseTtlMs) : () => {};
  const stopAnsweringFollowers = await app.turns.answerFollowers();
  steps.done();
  app.log.info({ url, data_dir: config.dataDir, turn_threads: config.turnWorkers }, 'agentd is listening');
  void limitsAvailable().then(
    (bounded) =>
      bounded || app.log.warn('bash calls are bounded in time and output only: no control group this process may write to (cgroup v1 pids and memory, or v2 with both delegated), so AGENTD_BASH_MAX_PROCESSES and AGENTD_BASH_MAX_MEMORY_MB do not apply'),
  );
  void app.interactions.resumeAnswered().catch((error: unknown) => app.log.error({ err: error }, 'could not resume answered interactions'));
  void app.evaluations
    .resume()
    .then((count) => count && app.log.info({ runs: count }, 'resumed unfinished evaluation runs'))
    .catch((error: unknown) => app.log.error({ err: error }, 'could not resume evaluation runs'));
  // Replicas share evaluation runs: each looks for runs it does not drive yet.
  const stopWatching = store.engine === 'postgres' ? app.evaluations.watch() : () => {};

  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      app.draining = true;
      app.log.info({ signal, grace_ms: config.shutdownGraceMs }, 'stopping: no new requests; live turns get the grace period');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  stopSweeping();
  stopWatching();
  // A continuation waiting to try again is not waited for: its answers stay responded for the next start.
  const continuations = app.interactions.close();
  await stopAnsweringFollowers();
  const closing = app.close();
  // Evaluation cases stop starting; those in flight end with their turns and run again next start.
  const evaluations = app.evaluations.drain();
  await app.turns.shutdown(config.shutdownGraceMs);
  await evaluations;
  await continuations;
  await drain(app.server, closing);
  await demo?.close();
  await store.close();
  return 0;
}

/**
 * Keep-alive connections would hold `close()` open for their whole idle timeout; once the turns
 * are over, connections with no request in flight are closed as soon as they go idle, and any
 * still open after a few seconds are cut.
 */
async function drain(server: import('node:http').Server, closing: Promise<unknown>): Promise<void> {
  let done = false;
  void closing.finally(() => (done = true));
  const deadline = Date.now() + 5_000;
  while (!done && Date.now() < deadline) {
    server.closeIdleConnections();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (!done) server.closeAllConnections();
  await closing;
}

/** What a listen that failed for a reason of the machine's (the port, the address) says, in one line; undefined for anything else. */
function listenFailure(error: NodeJS.ErrnoException, host: string, port: number): string | undefined {
  switch (error.code) {
    case 'EADDRINUSE':
      return `port ${port} on ${host} is in use (another agentd?); start on another with --port N or PORT=N`;
    case 'EACCES':
      return `port ${port} on ${host} may not be taken by this user (ports below 1024 need privileges); start on another with --port N or PORT=N`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EADDRNOTAVAIL':
      return `cannot listen on "${host}": ${error.code === 'EADDRNOTAVAIL' ? 'no interface of this machine has that address' : 'the name does not resolve'}; give an address of this machine with --host ADDR or HOST (127.0.0.1, or 0.0.0.0 for all interfaces)`;
    default:
      return undefined;
  }
}
