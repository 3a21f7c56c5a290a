import { constants } from 'node:fs';
import fs from 'node:fs/promises';
import { displayPath, isInside, openedPath } from './confine.ts';
import { looksBinary } from './files.ts';
import { globMatcher } from './glob.ts';
import { WALK_MAX_ENTRIES, walk } from './walk.ts';

export const GREP_MAX_MATCHES = 500;
export const GREP_MAX_FILE_BYTES = 5 * 1024 * 1024;
/** Long lines (minified code) are cut in the output; the match itself is still reported. */
const MAX_LINE_CHARS = 300;

export interface GrepRequest {
  /** Real path of the session folder. */
  realRoot: string;
  /** Real path of the file or folder to search, already confined. */
  start: string;
  pattern: string;
  ignoreCase: boolean;
  glob: string | undefined;
}

/** The search itself, free of tool plumbing so it can run in a worker thread. */
export async function grepSearch(req: GrepRequest): Promise<string> {
  const regex = new RegExp(req.pattern, req.ignoreCase ? 'i' : '');
  const matchesGlob = req.glob === undefined ? () => true : globMatcher(req.glob);
  const out: string[] = [];
  let capped = false;
  let walkLimited = false;

  const searchFile = async (abs: string): Promise<void> => {
    const text = await readSearchable(abs, req.realRoot);
    if (text === undefined) return;
    const shown = displayPath(req.realRoot, abs);
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i += 1) {
      let line = lines[i] as string;
      if (!regex.test(line)) continue;
      if (out.length === GREP_MAX_MATCHES) {
        capped = true;
        return;
      }
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line.length > MAX_LINE_CHARS) line = `${line.slice(0, MAX_LINE_CHARS)}…`;
      out.push(`${shown}:${i + 1}:${line}`);
    }
  };

  if ((await fs.stat(req.start)).isFile()) {
    await searchFile(req.start);
  } else {
    for await (const entry of walk(req.start, { realRoot: req.realRoot, onLimit: () => (walkLimited = true) })) {
      if (entry.kind !== 'file' || !matchesGlob(entry.rel)) continue;
      await searchFile(entry.abs);
      if (capped) break;
    }
  }

  if (out.length === 0) return walkLimited ? `no matches in the first ${WALK_MAX_ENTRIES} entries` : 'no matches';
  if (capped) out.push(`[stopped at ${GREP_MAX_MATCHES} matches; narrow the pattern, path or glob]`);
  else if (walkLimited) out.push(`[stopped after visiting ${WALK_MAX_ENTRIES} entries; use a narrower path]`);
  return out.join('\n');
}

/** The file's text, or undefined for what grep skips: non-regular, too large, binary, unreadable. */
async function readSearchable(abs: string, realRoot: string): Promise<string | undefined> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    // A folder on the way swapped for a symlink since the walk listed it: the file is elsewhere.
    const where = openedPath(handle.fd);
    if (where !== undefined && !isInside(realRoot, where)) return undefined;
    const stat = await handle.stat();
    if (!stat.isFile() || stat.size > GREP_MAX_FILE_BYTES) return undefined;
    const bytes = await handle.readFile();
    return looksBinary(bytes) ? undefined : bytes.toString('utf8');
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}
