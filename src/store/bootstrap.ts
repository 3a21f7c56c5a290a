import { isAppError } from '../errors.ts';
import type { Project } from './projects.ts';
import type { CreatedApiKey } from './api-keys.ts';
import type { Store } from './db.ts';

const DEFAULT_PROJECT_NAME = 'default';

/**
 * On a fresh database, creates the `default` project and one admin key so a first `agentd serve`
 * is usable at once: the only key there is must be able to make the others and the project's
 * connections from the console, not only from a shell on the server's machine. The caller prints the key: it is never shown again. Undefined once any
 * project exists, so later starts print nothing.
 */
export async function bootstrapFirstRun(store: Store): Promise<{ project: Project; apiKey: CreatedApiKey } | undefined> {
  if ((await store.projects.count()) > 0) return undefined;
  // Two first starts at once both see an empty table; only the one whose insert lands mints a key.
  let project: Project;
  try {
    project = await store.projects.create(DEFAULT_PROJECT_NAME);
  } catch (error) {
    if (isAppError(error)) return undefined;
    throw error;
  }
  const apiKey = await store.apiKeys.create(project.id, 'admin');
  return { project, apiKey };
}
