import { tool } from '@ai-sdk/provider-utils';
import { z } from 'zod';
import { confine } from './confine.ts';
import { globMatcher } from './glob.ts';
import { GREP_MAX_FILE_BYTES, GREP_MAX_MATCHES, type GrepRequest } from './grep-search.ts';
import { workerThread } from '../../worker-thread.ts';
import { ToolError } from './tool-error.ts';
import { SKIPPED_DIRS } from './walk.ts';

const GREP_TIMEOUT_MS = 30_000;

const input = z.object({
  pattern: z.string().describe('JavaScript regular expression, matched against each line'),
  path: z.string().optional().describe('File or folder to search, relative to the session folder (default ".")'),
  glob: z.string().optional().describe('Only search files matching this glob, e.g. "*.ts" or "src/**/*.py"'),
  ignore_case: z.boolean().optional().describe('Case-insensitive matching'),
});

export function grepTool(root: string, timeoutMs: number = GREP_TIMEOUT_MS) {
  return tool({
    description:
      'Search file contents in the session folder with a JavaScript regular expression. Returns "file:line:text" lines ' +
      `(paths relative to the session folder), at most ${GREP_MAX_MATCHES} matches. Binary files, files over ` +
      `${GREP_MAX_FILE_BYTES / 1024 / 1024} MiB and ${[...SKIPPED_DIRS].join('/')} folders are skipped; symbolic links are not followed.`,
    inputSchema: input,
    execute: async ({ pattern, path: userPath = '.', glob, ignore_case: ignoreCase }, { abortSignal }) => {
      try {
        new RegExp(pattern);
      } catch (error) {
        throw new ToolError(`pattern is not a valid JavaScript regular expression: ${(error as Error).message}`);
      }
      if (glob !== undefined) globMatcher(glob);
      const { path: start, realRoot } = confine(root, userPath, { mustExist: true });
      const request: GrepRequest = {
        realRoot,
        start,
        pattern,
        ignoreCase: ignoreCase ?? false,
        glob,
      };
      return runInWorker(request, timeoutMs, abortSignal);
    },
  });
}

/**
 * A model-written regex can backtrack for minutes; in a worker it can be stopped without
 * freezing every other session served by this process.
 */
function runInWorker(request: GrepRequest, timeoutMs: number, signal: AbortSignal | undefined): Promise<string> {
  signal?.throwIfAborted();
  return new Promise((resolve, reject) => {
    const worker = workerThread(new URL('./grep-worker.ts', import.meta.url), {
      workerData: request,
      resourceLimits: { maxOldGenerationSizeMb: 512 },
    });
    let settled = false;
    const finish = (settle: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      void worker.terminate();
      settle();
    };
    const timer = setTimeout(
      () => finish(() => reject(new ToolError(`grep timed out after ${timeoutMs} ms; simplify the pattern or narrow the path`))),
      timeoutMs,
    );
    const onAbort = (): void => finish(() => reject(new ToolError('grep was aborted')));
    signal?.addEventListener('abort', onAbort, { once: true });
    worker.once('message', (message: { ok: true; text: string } | { ok: false; message: string }) =>
      finish(() => (message.ok ? resolve(message.text) : reject(new ToolError(`grep failed: ${message.message}`)))),
    );
    worker.once('error', (error) => finish(() => reject(new ToolError(`grep failed: ${error.message}`))));
    worker.once('exit', (code) => finish(() => reject(new ToolError(`grep stopped unexpectedly (exit code ${code})`))));
  });
}
