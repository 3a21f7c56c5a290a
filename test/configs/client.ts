import { okJsonText, type Harness } from '../support/harness.ts';

/** Calls on the `/api` configuration routes of a harness. */

export interface ConfigCaller {
  key: string;
  projectId: string;
}

export function configsApi(h: Harness, method: string, rest: string, body?: unknown, as: ConfigCaller = { key: h.apiKey, projectId: h.projectId }, headers: Record<string, string> = {}): Promise<Response> {
  const sep = rest.includes('?') ? '&' : '?';
  return fetch(`${h.url}/api${rest}${sep}project_id=${as.projectId}`, {
    method,
    headers: { authorization: `ApiKey ${as.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** Creates a workflow whose first revision holds the given agent template (or parameters). */
export async function createWorkflow(h: Harness, slug: string, parameters: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<any> {
  const { body } = await okJsonText(await configsApi(h, 'POST', '/workflows', { slug, data: { parameters }, ...extra }), 201);
  return body;
}

export async function commit(h: Harness, workflow: string, parameters: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<any> {
  const { body } = await okJsonText(await configsApi(h, 'POST', `/workflows/${workflow}/revisions`, { data: { parameters }, ...extra }), 201);
  return body;
}

export async function deploy(h: Harness, environment: string, references: Record<string, unknown>, key?: string): Promise<any> {
  const { body } = await okJsonText(await configsApi(h, 'POST', `/environments/${environment}/deploy`, { references, ...(key ? { key } : {}) }));
  return body;
}
