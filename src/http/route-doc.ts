import type { FastifyContextConfig, FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ErrorType } from '../contract/errors.ts';
import { Paging } from '../contract/interactions.ts';
import type { Role } from '../store/schema.ts';

/**
 * What the API reference says of a route, declared where the route is registered (its
 * `config.doc`), so the document (openapi.ts) is made from the routes the server has and cannot
 * list one it lacks or miss one it has. Only data: the handlers read requests with zod, by the
 * same schemas named here.
 */
export interface RouteDoc {
  summary: string;
  /** The role the route needs: `authorize` (auth.ts) holds the caller's key to this one. */
  role: Role;
  body?: z.ZodType;
  /** The route takes a bodiless request though its config does not say `optionalBody` (an upload: no body is an empty file). */
  bodyOptional?: true;
  /** Content types of a body that is a file, not JSON. */
  rawBody?: readonly string[];
  /** A file to send, by content type of rawBody: shown as text to edit where a type has one, else a file to pick. */
  rawExamples?: Readonly<Record<string, string>>;
  ok: { status: number; schema?: z.ZodType; description: string; content?: string };
  query?: Record<string, Parameter>;
  /** Request headers the route reads (spec §4.1). */
  headers?: Record<string, Parameter>;
  /** Named request bodies a reader can copy; without them, the body schema's own example (withExample, src/contract/example.ts). */
  examples?: Record<string, { summary: string; value: unknown }>;
  /**
   * The error types the route's own work answers with; those of every route and of its shape (a
   * body, a session id) are added to them (route-errors.ts), as /openapi.json lists its statuses.
   */
  errors?: readonly ErrorType[];
  /** The reply's other content types (streams), each with what it carries and a sample. */
  streams?: Record<string, { description: string; example: string }>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What /openapi.json says of the route; every route of the API has one (`documentedRoutes`). */
    doc?: RouteDoc;
  }
}

/** A query or header parameter: the schema its route reads it with (values arrive as text, numbers as digits). */
export interface Parameter {
  description: string;
  schema: z.ZodType;
  required?: true;
}

export const parameter = (description: string, schema: z.ZodType = z.string(), required?: true): Parameter => ({ description, schema, ...(required ? { required } : {}) });

/** `limit` and `cursor`, as pageQuery (session-request.ts) reads them. */
export const paging = (what: string): Record<string, Parameter> => ({
  limit: parameter(`${what} per page, 1-200 (default 20)`, Paging.limit),
  cursor: parameter('The next value of the previous page', Paging.cursor),
});

/** `limit` and `cursor` of a list read whole without a limit, as listQuery (list-request.ts) reads them. */
export const listPaging = (what: string): Record<string, Parameter> => ({
  limit: parameter(`${what} per page, 1-200; absent, the whole list (and no next)`, Paging.limit),
  cursor: parameter('The next value of the previous page (of this list)', Paging.cursor),
});

/** Route options that document the route, beside the rest of its config. */
export function documented(doc: RouteDoc, config: Omit<FastifyContextConfig, 'doc'> = {}): { config: FastifyContextConfig } {
  return { config: { ...config, doc } };
}

/** The API's two surfaces: every route there needs a key (app.ts) and a doc. */
export function isApiPath(url: string): boolean {
  return url.startsWith('/api/') || url.startsWith('/services/');
}

/** A registered route as the document describes it: its doc, and what its registration says. */
export interface DocumentedRoute extends RouteDoc {
  method: string;
  /** As OpenAPI writes it: `/a/{id}` for the route's `/a/:id`. */
  path: string;
  params: string[];
}

/**
 * The documented routes of `app`, filled in as they are registered: it must be called before any
 * route is. A route of the API registered without a doc fails the registration, and so the
 * server's start, naming the route. The HEAD route Fastify adds beside each GET is not listed.
 */
export function documentedRoutes(app: FastifyInstance): DocumentedRoute[] {
  const routes: DocumentedRoute[] = [];
  app.addHook('onRoute', (route) => {
    const methods = [route.method].flat().filter((method) => method !== 'HEAD');
    const doc = route.config?.doc;
    if (!doc) {
      if (isApiPath(route.url)) throw new Error(`${methods.join(', ')} ${route.url} is a route of the API without a doc: give it one in its config (documented(), src/http/route-doc.ts)`);
      return;
    }
    const path = route.url.replace(/:(\w+)/g, '{$1}');
    const params = [...route.url.matchAll(/:(\w+)/g)].map((match) => match[1]!);
    // A route whose config lets an empty body be none takes a bodiless request: the document says so without being told twice.
    const bodyOptional = route.config?.optionalBody || doc.bodyOptional ? { bodyOptional: true as const } : {};
    for (const method of methods) routes.push({ ...doc, ...bodyOptional, method: method.toLowerCase(), path, params });
  });
  return routes;
}
