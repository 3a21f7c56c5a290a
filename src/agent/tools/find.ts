import { tool } from '@ai-sdk/provider-utils';
import fs from 'node:fs/promises';
import { z } from 'zod';
import { confine, displayPath } from './confine.ts';
import { globMatcher } from './glob.ts';
import { ToolError } from './tool-error.ts';
import { SKIPPED_DIRS, WALK_MAX_ENTRIES, walk } from './walk.ts';

export const FIND_MAX_RESULTS = 1000;

const input = z.object({
  pattern: z.string().describe('Glob such as "**/*.ts", "src/**/test_*.py" or "*.{js,json}"'),
  path: z.string().optional().describe('Folder to search, relative to the session folder (default "."); the pattern is relative to it'),
});

export function findTool(root: string) {
  return tool({
    description:
      'Find files and folders by glob pattern in the session folder. Supports *, ?, **, [abc] and {a,b}; a pattern ' +
      'without "/" matches names at any depth. Returns paths relative to the session folder, folders ending in "/", ' +
      `sorted, at most ${FIND_MAX_RESULTS}. Symbolic links are listed but not followed; ${[...SKIPPED_DIRS].join(' and ')} ` +
      'folders are not descended into unless path points inside them.',
    inputSchema: input,
    execute: async ({ pattern, path: userPath = '.' }, { abortSignal }) => {
      const matches = globMatcher(pattern);
      const { path: start, realRoot } = confine(root, userPath, { mustExist: true });
      if (!(await fs.stat(start)).isDirectory()) throw new ToolError(`"${userPath}" is a file, not a folder`);

      const found: string[] = [];
      let more = false;
      let walkLimited = false;
      for await (const entry of walk(start, { signal: abortSignal, realRoot, onLimit: () => (walkLimited = true) })) {
        if (!matches(entry.rel)) continue;
        if (found.length === FIND_MAX_RESULTS) {
          more = true;
          break;
        }
        found.push(displayPath(realRoot, entry.abs) + (entry.kind === 'dir' ? '/' : ''));
      }
      found.sort();
      if (found.length === 0) return walkLimited ? `no matches in the first ${WALK_MAX_ENTRIES} entries` : 'no matches';
      if (more) found.push(`[stopped at ${FIND_MAX_RESULTS} results; use a narrower pattern or path]`);
      else if (walkLimited) found.push(`[stopped after visiting ${WALK_MAX_ENTRIES} entries; use a narrower path]`);
      return found.join('\n');
    },
  });
}
