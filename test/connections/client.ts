import { okJsonText, type Harness } from '../support/harness.ts';

/** Calls on the connections API of a harness, with the key and project of the caller's choosing. */

export interface Caller {
  key: string;
  projectId: string;
}

export async function adminOf(h: Harness, projectId = h.projectId): Promise<Caller> {
  return { key: (await h.store.apiKeys.create(projectId, 'admin')).key, projectId };
}

export function connectionsApi(h: Harness, method: string, rest = '', init: { as: Caller; body?: unknown } = { as: { key: h.apiKey, projectId: h.projectId } }): Promise<Response> {
  return fetch(`${h.url}/api/connections${rest}?project_id=${init.as.projectId}`, {
    method,
    headers: { authorization: `ApiKey ${init.as.key}`, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(init.body === undefined ? {} : { body: typeof init.body === 'string' ? init.body : JSON.stringify(init.body) }),
  });
}

/** A successful JSON reply: JSON, the version header, no nulls. Returns the text too, to search it. */
export async function okJson(res: Response, status = 200): Promise<{ body: any; text: string }> {
  return okJsonText(res, status);
}
