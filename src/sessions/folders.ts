import { mkdir } from 'node:fs/promises';
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
