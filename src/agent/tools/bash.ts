import { tool } from '@ai-sdk/provider-utils';
import fs from 'node:fs/promises';
import { z } from 'zod';
import type { Config } from '../../config.ts';
import { callGroups, ENTER_GROUPS } from './cgroups.ts';
import { type ProcessOutcome, runProcess } from './run-process.ts';
import { BWRAP, bwrapEnv, bwrapInvocation, commandEnv, sandboxAvailable, shellArgv } from './sandbox.ts';
import { ToolError } from './tool-error.ts';

export interface BashContext {
  root: string;
  bash: Config['bash'];
  network: 'on' | 'off';
}

export const BWRAP_MISSING =
  'bash is disabled: bubblewrap (bwrap) is not installed on the server; install it with "apt-get install bubblewrap" ' +
  'or set AGENTD_UNSAFE_HOST_BASH=1 to run commands unsandboxed';

function inputSchema(maxTimeoutMs: number) {
  return z.object({
    command: z.string().min(1).describe('Shell command to run'),
    timeout_ms: z.number().int().min(1).optional().describe(`Time limit in ms; can only lower the server's ${maxTimeoutMs} ms`),
  });
}

// Every turn builds the tool set, bash included even when unused, and constructing this zod schema
// was the largest part of agentd's own per-turn work on the streamed path (BENCHMARKS.md). It
// depends only on the server's time limit, so it is built once per limit.
const inputSchemas = new Map<number, ReturnType<typeof inputSchema>>();

export function bashTool(ctx: BashContext) {
  const { timeoutMs: maxTimeoutMs, maxOutputBytes } = ctx.bash;
  let schema = inputSchemas.get(maxTimeoutMs);
  if (!schema) inputSchemas.set(maxTimeoutMs, (schema = inputSchema(maxTimeoutMs)));
  return tool({
    description:
      'Run a shell command with /bin/sh -c in the session folder (the working directory; HOME is the folder too). ' +
      'Each call is a fresh shell: cd, variables and background jobs do not outlive it. Only the session folder is ' +
      `writable; /tmp is private to the call. Network access is ${ctx.network === 'on' ? 'on' : 'off'}. ` +
      `Time limit ${maxTimeoutMs} ms; stdout and stderr are merged and capped at ${maxOutputBytes} bytes. ` +
      'The result starts with "exit code N"; a non-zero exit is not an error. Prefer read/write/edit/grep/find for files.',
    inputSchema: schema,
    execute: async ({ command, timeout_ms: requested }, { abortSignal }) => {
      const folder = await fs.realpath(ctx.root);
      const timeoutMs = Math.min(maxTimeoutMs, requested ?? maxTimeoutMs);
      const limits = { timeoutMs, maxOutputBytes, signal: abortSignal };
      let argv: string[];
      let options: Parameters<typeof runProcess>[2];
      if (await sandboxAvailable()) {
        const { args, fds } = await bwrapInvocation(folder, ctx.network);
        argv = [BWRAP, ...args, ...shellArgv(command)];
        options = { cwd: folder, env: bwrapEnv(), fds };
      } else if (ctx.bash.unsafeHost) {
        argv = shellArgv(command);
        options = { cwd: folder, env: commandEnv(folder) };
      } else {
        throw new ToolError(BWRAP_MISSING);
      }
      const groups = await callGroups(ctx.bash.limits);
      let outcome: ProcessOutcome;
      try {
        outcome = groups
          ? await runProcess('/bin/sh', ['-c', ENTER_GROUPS, 'agentd-bash', ...groups.procs, '--', ...argv], options, limits)
          : await runProcess(argv[0]!, argv.slice(1), options, limits);
      } finally {
        await groups?.remove();
      }
      return formatOutcome(outcome, timeoutMs);
    },
  });
}

function formatOutcome(outcome: ProcessOutcome, timeoutMs: number): string {
  const output = outcome.output + (outcome.truncated ? `\n[output truncated: showed the first ${Buffer.byteLength(outcome.output)} of ${outcome.totalBytes} bytes]` : '');
  if (outcome.ended === 'timeout') throw new ToolError(`timed out after ${timeoutMs} ms; output so far:\n${output}`);
  if (outcome.ended === 'abort') throw new ToolError(`aborted; output so far:\n${output}`);
  const status = outcome.exitCode !== null ? `exit code ${outcome.exitCode}` : `killed by signal ${outcome.signal ?? 'unknown'}`;
  return output === '' ? `${status}\n(no output)` : `${status}\n${output}`;
}
