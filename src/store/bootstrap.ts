import { isAppError } from '../errors.ts';
import { createProjectsRepo, type Project } from './projects.ts';
import { createApiKeysRepo, type CreatedApiKey } from './api-keys.ts';
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
  // One transaction: a start killed between the project and its key would leave a project, so
  // every later start would print nothing, and the key would be lost with no one having seen it.
  // Two first starts at once both see an empty table; only the one whose insert lands mints a key.
  return store.db.transaction().execute(async (trx) => {
    let project: Project;
    try {
      project = await createProjectsRepo(trx).create(DEFAULT_PROJECT_NAME);
    } catch (error) {
      if (isAppError(error)) return undefined;
      throw error;
    }
    const apiKey = await createApiKeysRepo(trx).create(project.id, 'admin');
    return { project, apiKey };
  });
}
