/**
 * Runs inside a harness's sandbox when its network is off (relay.ts): listens on the sandbox's own
 * loopback, one port per relay, forwards each connection to that relay's Unix socket, and runs the
 * harness, whose stdio it hands over untouched. A harness that runs on Node runs in this same
 * process (a second Node process would cost about 60 MB); a native one is its child, and this
 * process ends as it ends.
 *
 *   node relay-launcher.mjs <socket folder> <port,port,...> <program> [args...]
 *
 * Plain JavaScript, not TypeScript like the rest: Node would load its type stripper for a .ts file,
 * some 25 MB more in every sandbox.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [socketDir, portList, program, ...args] = process.argv.slice(2);
if (!socketDir || !portList || !program) {
  process.stderr.write('usage: relay-launcher <socket folder> <port,port,...> <program> [args...]\n');
  process.exit(2);
}

const ports = portList.split(',').map(Number);
await Promise.all(
  ports.map(
    (port, i) =>
      new Promise((resolve, reject) => {
        // No Nagle delay on the forwarded connection: a streamed model answer is many small writes.
        const server = net.createServer({ noDelay: true }, (inbound) => {
          const outbound = net.connect(path.join(socketDir, `${i}.sock`));
          inbound.pipe(outbound).pipe(inbound);
          inbound.once('error', () => outbound.destroy());
          outbound.once('error', () => inbound.destroy());
        });
        server.once('error', reject);
        // The harness decides when this process ends, not the relay.
        server.unref();
        server.listen(port, '127.0.0.1', () => resolve());
      }),
  ),
);

if (program === process.execPath) {
  // As if started as `node <entry> [args...]`.
  process.argv.splice(1, process.argv.length, ...args);
  await import(pathToFileURL(args[0]).href);
} else {
  runChild(program, args);
}

/** @param {string} program @param {string[]} args */
function runChild(program, args) {
  const child = spawn(program, args, { stdio: 'inherit' });
  child.once('error', (error) => {
    process.stderr.write(`relay-launcher: cannot start ${program}: ${error.message}\n`);
    process.exit(127);
  });
  child.once('exit', (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
  for (const signal of /** @type {const} */ (['SIGTERM', 'SIGINT'])) process.on(signal, () => child.kill(signal));
}
