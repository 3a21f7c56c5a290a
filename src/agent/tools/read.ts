import { tool } from '@ai-sdk/provider-utils';
import fs from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { promisify } from 'node:util';
import { z } from 'zod';
import { confine } from './confine.ts';
import { looksBinary, openRegularFileSync, SYNC_IO_MAX_BYTES } from './files.ts';
import { ToolError } from './tool-error.ts';

export const READ_MAX_OUTPUT_BYTES = 256 * 1024;
const CHUNK_BYTES = 64 * 1024;
const readInPool = promisify(fs.read);

const input = z.object({
  path: z.string().describe('File to read, relative to the session folder'),
  offset: z.number().int().min(1).optional().describe('First line to return, 1-based (default 1)'),
  limit: z.number().int().min(1).optional().describe('Maximum number of lines to return (default: all)'),
});

export function readTool(root: string) {
  return tool({
    description:
      'Read a text file in the session folder. Returns the file\'s lines exactly as stored (no line numbers). ' +
      `Output is capped at ${READ_MAX_OUTPUT_BYTES / 1024} KiB; use offset and limit to page through large files. ` +
      'Binary files are refused.',
    inputSchema: input,
    execute: async ({ path: userPath, offset, limit }) => readLines(root, userPath, offset ?? 1, limit),
  });
}

/**
 * Streams the file so a huge file costs at most one chunk beyond what is returned, and stops at
 * the first NUL byte because a binary file is noise to the model.
 */
async function readLines(root: string, userPath: string, offset: number, limit: number | undefined): Promise<string> {
  const { path: real, realRoot } = confine(root, userPath, { mustExist: true });
  const { fd, size } = openRegularFileSync(real, userPath, realRoot);
  const decoder = new StringDecoder('utf8');
  const buffer = Buffer.alloc(CHUNK_BYTES);
  // A larger file is read through the pool, a chunk at a time.
  const readChunk =
    size <= SYNC_IO_MAX_BYTES
      ? () => fs.readSync(fd, buffer, 0, CHUNK_BYTES, null)
      : async () => (await readInPool(fd, buffer, 0, CHUNK_BYTES, null)).bytesRead;
  const out: string[] = [];
  let outBytes = 0;
  let pending = '';
  let lineNo = 0;
  let firstChunk = true;
  let stop: 'limit' | 'bytes' | undefined;
  let cutLine = false;

  const take = (line: string): void => {
    lineNo += 1;
    if (lineNo < offset) return;
    if (limit !== undefined && out.length >= limit) {
      stop = 'limit';
      return;
    }
    const size = Buffer.byteLength(line, 'utf8');
    if (outBytes + size > READ_MAX_OUTPUT_BYTES) {
      // One line bigger than the whole cap (minified code) is still shown in part.
      if (out.length === 0) {
        out.push(Buffer.from(line, 'utf8').subarray(0, READ_MAX_OUTPUT_BYTES).toString('utf8'));
        cutLine = true;
      }
      stop = 'bytes';
      return;
    }
    out.push(line);
    outBytes += size;
  };

  try {
    for (;;) {
      const bytesRead = await readChunk();
      if (bytesRead === 0) break;
      const bytes = buffer.subarray(0, bytesRead);
      if (firstChunk ? looksBinary(bytes) : bytes.includes(0)) {
        throw new ToolError(`"${userPath}" is a binary file; read only works on text files`);
      }
      firstChunk = false;
      const parts = (pending + decoder.write(bytes)).split('\n');
      pending = parts.pop() ?? '';
      for (const part of parts) {
        take(part + '\n');
        if (stop) break;
      }
      if (stop) break;
    }
    if (!stop) {
      pending += decoder.end();
      if (pending !== '') take(pending);
    }
  } finally {
    fs.closeSync(fd);
  }

  const last = offset + out.length - 1;
  if (out.length === 0 && !stop) {
    if (lineNo === 0) return '(the file is empty)';
    throw new ToolError(`offset ${offset} is past the end of "${userPath}", which has ${lineNo} line(s)`);
  }
  const text = out.join('');
  if (cutLine) {
    return `${text}\n[line ${offset} is longer than ${READ_MAX_OUTPUT_BYTES / 1024} KiB and was cut; the next line is offset=${offset + 1}]`;
  }
  if (stop === 'bytes') {
    return `${text}\n[output truncated at ${READ_MAX_OUTPUT_BYTES / 1024} KiB after line ${last}; continue with offset=${last + 1}]`;
  }
  if (stop === 'limit') return `${text}\n[showed lines ${offset}-${last}; more follow, continue with offset=${last + 1}]`;
  return text;
}
