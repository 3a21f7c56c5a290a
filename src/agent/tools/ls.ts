import { tool } from '@ai-sdk/provider-utils';
import fsSync from 'node:fs';
import fs from 'node:fs/promises';
import { z } from 'zod';
import { checkOpened, confine, inOpenedFolder, readlinkOrNone } from './confine.ts';
import { fileError } from './files.ts';
import { ToolError } from './tool-error.ts';

const LS_MAX_ENTRIES = 1000;

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
      const { path: real, realRoot } = confine(root, userPath, { mustExist: true });
      // The stat and the links' reads are synchronous (a few µs each, 30–55 through the thread
      // pool); the listing, which a huge folder makes long, is not. The folder is listed through a
      // descriptor checked to be inside, so a folder swapped for a symlink since the check is refused.
      let dirFd: number;
      try {
        dirFd = fsSync.openSync(real, fsSync.constants.O_RDONLY | fsSync.constants.O_DIRECTORY);
      } catch (error) {
        if ((error as { code?: string }).code === 'ENOTDIR') throw new ToolError(`"${userPath}" is a file, not a folder; use read to see its content`);
        throw fileError(error, userPath);
      }
      let dirents: fsSync.Dirent[];
      try {
        checkOpened(realRoot, dirFd, userPath);
        dirents = await fs.readdir(inOpenedFolder(dirFd), { withFileTypes: true }).catch((error: unknown) => {
          throw fileError(error, userPath);
        });
      } finally {
        fsSync.closeSync(dirFd);
      }
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
