import { tool } from '@ai-sdk/provider-utils';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { z } from 'zod';
import { confine, displayPath } from './confine.ts';
import { looksBinary, openRegularFileSync, SYNC_IO_MAX_BYTES, writeRegularFile } from './files.ts';
import { ToolError } from './tool-error.ts';

/** Edits rewrite the whole file in memory; beyond this size bash tools (sed) are the better fit. */
const EDIT_MAX_BYTES = 10 * 1024 * 1024;
const readFileInPool = promisify(fs.readFile);

const input = z.object({
  path: z.string().describe('File to edit, relative to the session folder'),
  old_string: z.string().describe('Exact text to replace, including whitespace and indentation'),
  new_string: z.string().describe('Text to put in its place'),
  replace_all: z.boolean().optional().describe('Replace every occurrence (default: old_string must occur exactly once)'),
});

export function editTool(root: string) {
  return tool({
    description:
      'Replace exact text in an existing file of the session folder. old_string must match the file byte for byte ' +
      '(read the file first) and, unless replace_all is true, occur exactly once; include surrounding lines to make it unique.',
    inputSchema: input,
    execute: async ({ path: userPath, old_string: oldString, new_string: newString, replace_all: replaceAll }) => {
      if (oldString === '') throw new ToolError('old_string is empty; to create or overwrite a file use write');
      if (oldString === newString) throw new ToolError('old_string and new_string are identical; nothing to change');
      const { path: real, realRoot } = confine(root, userPath, { mustExist: true });
      const text = await readText(realRoot, real, userPath);

      const count = countOccurrences(text, oldString);
      if (count === 0) {
        throw new ToolError(
          `old_string was not found in "${userPath}"; read the file and copy the text exactly, including whitespace and line breaks`,
        );
      }
      if (count > 1 && !replaceAll) {
        throw new ToolError(
          `old_string occurs ${count} times in "${userPath}"; include more surrounding text to make it unique, or set replace_all to true`,
        );
      }
      // split/join rather than String.replace: "$&" and friends in new_string must stay literal.
      await writeRegularFile(realRoot, real, userPath, text.split(oldString).join(newString));
      const shown = displayPath(realRoot, real);
      return `replaced ${count} occurrence${count === 1 ? '' : 's'} in ${shown}`;
    },
  });
}

/** Opened and checked synchronously, and read so up to `SYNC_IO_MAX_BYTES`, as `read` reads. */
async function readText(realRoot: string, real: string, userPath: string): Promise<string> {
  const { fd, size } = openRegularFileSync(real, userPath, realRoot);
  let bytes: Buffer;
  try {
    if (size > EDIT_MAX_BYTES) {
      throw new ToolError(`"${userPath}" is ${size} bytes, over the ${EDIT_MAX_BYTES / 1024 / 1024} MiB edit limit; use bash (e.g. sed) instead`);
    }
    bytes = size <= SYNC_IO_MAX_BYTES ? fs.readFileSync(fd) : await readFileInPool(fd);
  } finally {
    fs.closeSync(fd);
  }
  if (looksBinary(bytes) || bytes.includes(0)) throw new ToolError(`"${userPath}" is a binary file; edit only works on text files`);
  return bytes.toString('utf8');
}

function countOccurrences(text: string, needle: string): number {
  let count = 0;
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) count += 1;
  return count;
}
