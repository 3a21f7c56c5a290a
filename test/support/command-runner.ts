import { runProcess } from '../../src/agent/tools/run-process.ts';
import { HarnessConnection } from '../../src/harnesses/harness-connection.ts';

/**
 * A process that starts one command the way the bash tool does (`bash`), or as a harness process
 * (`harness`: it never answers `initialize`), and is then killed by its test.
 */
const [mode, folder, command] = process.argv.slice(2);
const env = { PATH: '/usr/bin:/bin' };
if (mode === 'harness') void HarnessConnection.start({ file: '/bin/sh', args: ['-c', command!], env, mcpServers: [] }, folder!, new AbortController().signal);
else void runProcess('/bin/sh', ['-c', command!], { cwd: folder!, env }, { timeoutMs: 60_000, maxOutputBytes: 1024 });
