import { runProcess } from '../../src/agent/tools/run-process.ts';

/** A process that runs one command the way the bash tool does, and is then killed by its test. */
const [folder, command] = process.argv.slice(2);
void runProcess('/bin/sh', ['-c', command!], { cwd: folder!, env: { PATH: '/usr/bin:/bin' } }, { timeoutMs: 60_000, maxOutputBytes: 1024 });
