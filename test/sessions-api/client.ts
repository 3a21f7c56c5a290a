import { request as httpRequest } from 'node:http';
import { okJsonText, type Harness } from '../support/harness.ts';

/** Calls on the sessions API of a harness, with a key and project of the caller's choosing. */

export interface Caller {
  key: string;
  projectId: string;
}

export interface CallInit {
  as?: Caller;
  query?: Record<string, string>;
  body?: BodyInit;
  headers?: Record<string, string>;
}

export function owner(h: Harness): Caller {
  return { key: h.apiKey, projectId: h.projectId };
}

export function sessionUrl(h: Harness, sessionId: string, rest = '', init: CallInit = {}): string {
  const caller = init.as ?? owner(h);
  const query = new URLSearchParams({ project_id: caller.projectId, ...init.query });
  return `${h.url}/api/sessions/${encodeURIComponent(sessionId)}${rest}?${query}`;
}

export function call(h: Harness, method: string, sessionId: string, rest = '', init: CallInit = {}): Promise<Response> {
  const caller = init.as ?? owner(h);
  return fetch(sessionUrl(h, sessionId, rest, init), {
    method,
    headers: { authorization: `ApiKey ${caller.key}`, ...init.headers },
    ...(init.body !== undefined ? { body: init.body } : {}),
  });
}

export const getSession = (h: Harness, sessionId: string, init: CallInit = {}) => call(h, 'GET', sessionId, '', init);
export const deleteSession = (h: Harness, sessionId: string, init: CallInit = {}) => call(h, 'DELETE', sessionId, '', init);

export function getFiles(h: Harness, sessionId: string, path?: string, init: CallInit = {}): Promise<Response> {
  return call(h, 'GET', sessionId, '/files', { ...init, query: { ...init.query, ...(path !== undefined ? { path } : {}) } });
}

export function putFile(h: Harness, sessionId: string, path: string, bytes: BodyInit, init: CallInit = {}): Promise<Response> {
  return call(h, 'PUT', sessionId, '/files', {
    ...init,
    query: { ...init.query, path },
    body: bytes,
    headers: { 'content-type': 'application/octet-stream', ...init.headers },
  });
}

/** A successful JSON reply of the sessions API: JSON, the version header, no nulls. */
export async function okJson(res: Response, status = 200): Promise<any> {
  return (await okJsonText(res, status)).body;
}

/**
 * A GET with the path sent byte for byte: fetch's URL parser resolves `..` and `%2E%2E` segments
 * before sending, which would hide what the server does with them.
 */
export function rawGet(h: Harness, pathAndQuery: string, caller: Caller): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${h.url}${pathAndQuery}`, { method: 'GET', headers: { authorization: `ApiKey ${caller.key}` } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** A second project with an editor key, to prove nothing of the first is visible from it. */
export async function otherProject(h: Harness, name = 'other'): Promise<Caller> {
  const project = await h.store.projects.ensure(name);
  const key = await h.store.apiKeys.create(project.id, 'editor');
  return { key: key.key, projectId: project.id };
}

export async function viewerOf(h: Harness): Promise<Caller> {
  const key = await h.store.apiKeys.create(h.projectId, 'viewer');
  return { key: key.key, projectId: h.projectId };
}

export async function waitFor(check: () => Promise<boolean>, what = 'condition'): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`${what} not reached`);
}
