import { rmdir, stat } from 'node:fs/promises';
import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Config } from '../../config.ts';
import { withExample } from '../../contract/example.ts';
import { FileListing, FileUploaded } from '../../contract/sessions.ts';
import { AppError } from '../../errors.ts';
import { listFolder, locate, openDownload, writeUpload } from '../../sessions/files.ts';
import { sharingFolder } from '../../sessions/folder-lock.ts';
import { ensureSessionFolder, sessionFolder } from '../../sessions/folders.ts';
import type { Store } from '../../store/db.ts';
import { authorize, type Principal } from '../auth.ts';
import { documented, parameter } from '../route-doc.ts';
import { runHeaders } from '../run-headers.ts';
import { filePathQuery, sessionIdParam, sessionNotFound } from '../session-request.ts';

export interface SessionFileRoutesDeps {
  store: Store;
  config: Config;
}

const UPLOAD_TYPE = 'application/octet-stream';

/**
 * `content-disposition` for a download: a plain ASCII `filename` every client understands, and
 * the exact name in `filename*` (RFC 6266) for those that read it.
 */
function attachment(name: string): string {
  const fallback = name.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const exact = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${fallback}"; filename*=UTF-8''${exact}`;
}

/** A session's folder; one whose turns never ran a tool has none yet, and gets it, empty. */
async function existingFolder(store: Store, config: Config, projectId: string, sessionId: string): Promise<string> {
  const folder = sessionFolder(config.dataDir, projectId, sessionId);
  const found = await stat(folder).catch(() => undefined);
  if (found?.isDirectory()) return folder;
  if (!(await store.sessions.get(projectId, sessionId))) throw sessionNotFound(sessionId);
  return ensureSessionFolder(config.dataDir, projectId, sessionId);
}

/**
 * Listing, downloading and uploading files of a session folder. Its own plugin, so the raw-bytes
 * body parser and the upload size limit apply to these routes and no others.
 */
export async function sessionFileRoutes(app: FastifyInstance, deps: SessionFileRoutesDeps): Promise<void> {
  const { store, config } = deps;

  // Only raw bytes are an upload; a JSON or form body here is a client mistake, not a file.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(UPLOAD_TYPE, { parseAs: 'buffer', bodyLimit: config.maxUploadBytes }, (_request, body, done) => done(null, body));

  // Fastify's own body errors, worded for uploads; the app's handler renders what is thrown here.
  app.setErrorHandler(async (error: FastifyError) => {
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      throw new AppError('payload-too-large', `the file is larger than the ${config.maxUploadBytes} bytes an upload may carry (AGENTD_MAX_UPLOAD)`);
    }
    if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      throw new AppError('unsupported-media-type', `send the file's bytes as the body with "Content-Type: ${UPLOAD_TYPE}"`);
    }
    throw error;
  });

  app.get(
    '/api/sessions/:session_id/files',
    documented({
      summary: "List a folder of the session's working folder, or download a file",
      role: 'viewer',
      errors: ['not-found'],
      query: { path: parameter('Relative to the session folder (default ".")') },
      ok: { status: 200, schema: FileListing, description: 'A folder listing (JSON) or the file (application/octet-stream)' },
    }),
    async (request, reply) => {
      const { projectId } = await authorize(store, request);
      const sessionId = sessionIdParam(request);
      const userPath = filePathQuery(request, '.');
      const opened = await sharingFolder(sessionFolder(config.dataDir, projectId, sessionId), async () => {
        const folder = await existingFolder(store, config, projectId, sessionId);
        const found = await locate(folder, userPath);
        return found.type === 'directory' ? { listing: await listFolder(folder, found) } : { file: await openDownload(found, userPath) };
      });
      reply.headers(runHeaders({ sessionId }));
      if ('listing' in opened) return opened.listing;
      const { file } = opened;
      // Streamed from disk, so a large file never sits in memory; an open file outlives a delete.
      return reply
        .headers({ 'content-type': UPLOAD_TYPE, 'content-length': String(file.size), 'content-disposition': attachment(file.name) })
        .send(file.stream);
    },
  );

  // Who may upload is settled before the body is read, so a refused upload costs no transfer.
  const uploaders = new WeakMap<FastifyRequest, { principal: Principal; sessionId: string }>();
  app.put(
    '/api/sessions/:session_id/files',
    {
      ...documented({
        summary: 'Upload a file into the session folder',
        role: 'editor',
        query: { path: parameter('Where to write it, relative to the session folder', withExample(z.string().min(1), 'notes/todo.md'), true) },
        rawBody: [UPLOAD_TYPE],
        // No body writes an empty file.
        bodyOptional: true,
        ok: { status: 201, schema: FileUploaded, description: 'Written' },
      }),
      onRequest: async (request) => {
        const principal = await authorize(store, request);
        uploaders.set(request, { principal, sessionId: sessionIdParam(request) });
      },
    },
    async (request, reply): Promise<FileUploaded> => {
      const { principal, sessionId } = uploaders.get(request)!;
      const userPath = filePathQuery(request);
      // Fastify leaves the body undefined when a request without a Content-Type sends nothing.
      const body = request.body === undefined ? Buffer.alloc(0) : (request.body as Buffer);
      const { projectId } = principal;
      const written = await sharingFolder(sessionFolder(config.dataDir, projectId, sessionId), async () => {
        const existed = (await stat(sessionFolder(config.dataDir, projectId, sessionId)).catch(() => undefined)) !== undefined;
        const folder = await ensureSessionFolder(config.dataDir, projectId, sessionId);
        let uploaded: FileUploaded;
        try {
          uploaded = await writeUpload(folder, userPath, body);
        } catch (error) {
          // A refused upload does not leave behind a session it created; rmdir spares a folder something else filled meanwhile.
          if (!existed) await rmdir(folder).catch(() => undefined);
          throw error;
        }
        await store.sessions.touch(projectId, sessionId);
        return uploaded;
      });
      return reply.code(201).headers(runHeaders({ sessionId })).send(written);
    },
  );
}
