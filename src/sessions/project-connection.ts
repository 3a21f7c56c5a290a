import type { ProjectConnection } from '../contract/connections.ts';
import type { EffectiveTemplate } from '../agent/template.ts';
import { AppError } from '../errors.ts';
import type { Store } from '../store/db.ts';
import { SecretBoxMismatch } from '../store/secret-box.ts';

/**
 * Reads the project connection a template's `llm` names, its key decrypted for this turn only;
 * undefined for a template on the server's own providers.
 */
export async function openProjectConnection(store: Store, projectId: string, llm: EffectiveTemplate['llm']): Promise<ProjectConnection | undefined> {
  if (llm.connection.mode !== 'project') return undefined;
  const slug = llm.connection.slug!;
  let connection: ProjectConnection | undefined;
  try {
    connection = await store.connections.open(projectId, slug);
  } catch (error) {
    // The operator's to fix, like a provider refusing a key: the turn cannot reach its model.
    if (error instanceof SecretBoxMismatch) {
      throw new AppError(
        'upstream-auth',
        `the API key stored in connection "${slug}" cannot be decrypted with this server's AGENTD_SECRET_KEY (or secret.key in its data folder): ` +
          'it was stored under another key. Start the server with that key again, or delete the connection and create it anew',
      );
    }
    throw error;
  }
  if (!connection) {
    throw new AppError(
      'not-found',
      `this project has no connection "${slug}" (data.parameters.agent.llm.connection.slug); ` +
        `an admin creates it with POST /api/connections {"slug": "${slug}", "provider": "...", "api_key": "..."}`,
    );
  }
  return connection;
}
