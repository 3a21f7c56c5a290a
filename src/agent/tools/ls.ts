import { tool } from 'ai';
import fsSync from 'node:fs';
import fs from 'node:fs/promises';
import { z } from 'zod';
import { readlinkOrNone, resolveInside } from './confine.ts';
import { fileError } from './files.ts';
import { ToolError } from './tool-error.ts';

export const LS_MAX_ENTRIES = 1000;

const input = z.object({
  path: z.string().optional().describe('Folder to list, relative to the session folder (default ".")'),
});

export function lsTool(root: string) {
  return tool({
    description:
      'List a folder of the session folder (not recursive). Directories end with "/", symbolic links show "name -> target". ' +
      `Sorted by name, at most ${LS_MAX_ENTRIES} entries. Use find for recursive listings.`,
    inputSchema: input,
    execute: async ({ path: userPath = '.' }) => {
      const real = resolveInside(root, userPath, { mustExist: true });
      // The stat and the links' reads are synchronous (a few µs each, 30–55 through the thread
      // pool); the listing, which a huge folder makes long, is not.
      const stat = fsSync.statSync(real);
      if (!stat.isDirectory()) throw new ToolError(`"${userPath}" is a file, not a folder; use read to see its content`);
      const dirents = await fs.readdir(real, { withFileTypes: true }).catch((error: unknown) => {
        throw fileError(error, userPath);
      });
      dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

      const lines: string[] = [];
      for (const dirent of dirents.slice(0, LS_MAX_ENTRIES)) {
        if (dirent.isDirectory()) lines.push(`${dirent.name}/`);
        else if (dirent.isSymbolicLink()) {
          lines.push(`${dirent.name} -> ${readlinkOrNone(`${real}/${dirent.name}`) ?? '?'}`);
        } else lines.push(dirent.name);
      }
      if (lines.length === 0) return '(empty folder)';
      if (dirents.length > LS_MAX_ENTRIES) {
        lines.push(`[showed ${LS_MAX_ENTRIES} of ${dirents.length} entries; use find with a pattern to narrow]`);
      }
      return lines.join('\n');
    },
  });
}
