import { tool } from '@ai-sdk/provider-utils';
import { z } from 'zod';
import { displayPath } from './confine.ts';
import { writeInside } from './files.ts';

const input = z.object({
  path: z.string().describe('File to write, relative to the session folder; missing parent folders are created'),
  content: z.string().describe('The complete new content of the file'),
});

export function writeTool(root: string) {
  return tool({
    description:
      'Create or overwrite a file in the session folder with the given content. Missing parent folders are created. ' +
      'To change part of an existing file, prefer edit.',
    inputSchema: input,
    execute: async ({ path: userPath, content }) => {
      const { real, realRoot, bytes } = await writeInside(root, userPath, content);
      return `wrote ${bytes} bytes to ${displayPath(realRoot, real)}`;
    },
  });
}
