import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';

/**
 * A session's working folder: `<data dir>/sessions/<project>/<session>/`. Session ids may be `.`
 * or `..` by the spec's pattern, so names made only of dots are escaped (`%` never appears in a
 * valid id, so the escape cannot collide with another session).
 */
export function sessionFolder(dataDir: string, projectId: string, sessionId: string): string {
  const name = /^\.+$/.test(sessionId) ? sessionId.replaceAll('.', '%2E') : sessionId;
  return path.join(dataDir, 'sessions', projectId, name);
}

/**
 * Where a coding-agent harness keeps its own state for a session (its sessions, settings):
 * `<data dir>/harness-state/<project>/<session>/`, outside the session folder, so nothing the agent
 * or a download reaches holds it.
 */
export function harnessStateFolder(dataDir: string, projectId: string, sessionId: string): string {
  return path.join(dataDir, 'harness-state', path.relative(path.join(dataDir, 'sessions'), sessionFolder(dataDir, projectId, sessionId)));
}

export async function ensureSessionFolder(dataDir: string, projectId: string, sessionId: string): Promise<string> {
  const folder = sessionFolder(dataDir, projectId, sessionId);
  await mkdir(folder, { recursive: true });
  return folder;
}

/** How the folders of deleted sessions waiting to be removed are named in each tree; no project id (a UUID) begins so. */
const DELETED = '.deleted-';
const TREES = [
  ['sessions', sessionFolder],
  ['harness-state', harnessStateFolder],
] as const;

/**
 * Moves a session's folders out of their places, each with one rename, to `<tree>/.deleted-<id>`,
 * and answers how to remove them, which the caller does once the session's records are gone. So
 * a deletion cut off at any point leaves the session with all its files or none: never a session
 * listed with half of them, nor files under an id that a new session may take.
 */
export async function moveSessionAside(dataDir: string, projectId: string, sessionId: string): Promise<() => Promise<void>> {
  const moved: string[] = [];
  for (const [tree, folderOf] of TREES) {
    const folder = folderOf(dataDir, projectId, sessionId);
    const aside = path.join(dataDir, tree, `${DELETED}${randomUUID()}`);
    try {
      await rename(folder, aside);
      moved.push(aside);
    } catch (error) {
      // Never made (a folder is made on demand) or moved by a deletion before.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  return async () => {
    for (const aside of moved) await rm(aside, { recursive: true, force: true });
  };
}

/** Removes what deletions cut off by a killed server left moved aside (at start). */
export async function removeDeletedFolders(dataDir: string): Promise<void> {
  for (const [tree] of TREES) {
    const root = path.join(dataDir, tree);
    for (const name of await readdir(root).catch(() => [])) {
      if (name.startsWith(DELETED)) await rm(path.join(root, name), { recursive: true, force: true });
    }
  }
}
