import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** Where `npm run build` puts the console (web/, built by Vite). */
export const CONSOLE_DIR = fileURLToPath(new URL('../../dist/console/', import.meta.url));

/**
 * The pages may run only the scripts and styles served with them, talk only to this server, and
 * never be framed: a model's answer that slipped past escaping still could not run or send
 * anything anywhere.
 */
const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Swagger UI sets inline styles from its scripts and shows data: images; nothing leaves the server. */
const DOCS_CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/**
 * Swagger UI's colours that fall under WCAG AA's 4.5:1 on their background: white on its light
 * method badges, version pills, Execute and Download buttons, light text on white or pale green,
 * the strings of its example code. Darker (lighter on the dark code), mostly from its own dark theme.
 * And each operation's copy-path button, which Swagger UI keeps 0 px wide yet focusable until the
 * pointer is over the operation, then grows over half a second: always shown at its full 24 px, a
 * keyboard user sees where focus is and no one meets it half grown, under WCAG 2.2's target size.
 */
const DOCS_CSS = `
.swagger-ui .opblock .opblock-summary-method { color: #080a0b; text-shadow: none; }
.swagger-ui .info .title small { background: #434b4f; }
.swagger-ui .info .title small.version-stamp { background: #1d632e; }
.swagger-ui .info a { color: #1f69c0; }
.swagger-ui .btn.authorize { color: #13784a; border-color: #13784a; }
.swagger-ui .btn.authorize svg { color: #13784a; }
.swagger-ui .opblock .opblock-section-header .try-out__btn.cancel { color: #c01f1f; border-color: #c01f1f; }
.swagger-ui .opblock .parameter__in { color: #595959; }
.swagger-ui .btn.execute { background-color: #1f69c0; border-color: #1f69c0; }
.swagger-ui .download-contents { background: #595959; }
.swagger-ui .microlight span[style*="211, 99, 99"], .swagger-ui .microlight span[style*="d36363"] { color: #f08d8d !important; }
.swagger-ui .opblock .opblock-summary .view-line-link.copy-to-clipboard { width: 24px; margin: 0 5px; transition: none; }
`;

/**
 * Names for what Swagger UI renders without one, set again whenever it renders: its dialog's close
 * button, the selects of enum parameters and of examples, the request body's editor; a keyboard
 * stop on example code that scrolls; and its dialog's Authorize button, named "Apply credentials"
 * where it reads "Authorize", which a voice user says as they see it.
 */
const DOCS_JS = `
const NAMES = [['.close-modal', 'Close'], ['.examples-select-element', 'Example'], ['textarea.body-param__text', 'Request body']];
function name() {
  for (const [selector, label] of NAMES) for (const el of document.querySelectorAll(selector + ':not([aria-label])')) el.setAttribute('aria-label', label);
  for (const el of document.querySelectorAll('tr[data-param-name] select:not([aria-label]), tr[data-param-name] textarea:not([aria-label])')) el.setAttribute('aria-label', el.closest('tr').dataset.paramName);
  for (const el of document.querySelectorAll('.auth-btn-wrapper button[aria-label]')) el.removeAttribute('aria-label');
  for (const el of document.querySelectorAll('.microlight:not([tabindex]), .body-param__example:not([tabindex])')) el.setAttribute('tabindex', '0');
}
new MutationObserver(name).observe(document.documentElement, { childList: true, subtree: true });
`;

function securityHeaders(reply: { setHeader(name: string, value: string): unknown }, csp: string): void {
  reply.setHeader('content-security-policy', csp);
  reply.setHeader('x-content-type-options', 'nosniff');
  reply.setHeader('referrer-policy', 'no-referrer');
  reply.setHeader('x-frame-options', 'DENY');
}

const NOT_BUILT = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>agentd</title></head>
<body><h1>agentd</h1><p>The console is not built. Run <code>npm run build</code> (<code>npm install</code> runs it) and start the server again.</p>
<p>The API works without it: <a href="/docs">/docs</a>.</p></body></html>`;

/**
 * The web console at `/` (a static bundle that talks to the server only over its HTTP API) and
 * the API reference at `/docs`, rendered by Swagger UI from the same document as `/openapi.json`.
 */
export async function consoleRoutes(app: FastifyInstance, deps: { openapi: Record<string, unknown>; dir?: string }): Promise<void> {
  const dir = deps.dir ?? CONSOLE_DIR;
  if (existsSync(dir)) {
    await app.register(fastifyStatic, {
      root: dir,
      prefix: '/',
      // One route per built file, so a path that is not one gets the API's own 404.
      wildcard: false,
      cacheControl: false,
      // Hashed asset names change with their content: cached for good. The page itself is always asked anew.
      setHeaders: (res, path) => {
        securityHeaders(res, CONSOLE_CSP);
        res.setHeader('cache-control', /[\\/]assets[\\/]/.test(path) ? 'public, max-age=31536000, immutable' : 'no-cache');
      },
    });
  } else {
    app.get('/', async (_request, reply: FastifyReply) => {
      securityHeaders(reply.raw, CONSOLE_CSP);
      return reply.code(503).type('text/html; charset=utf-8').send(NOT_BUILT);
    });
  }

  await app.register(fastifySwagger, { mode: 'static', specification: { document: deps.openapi as never } });
  // A scope of its own, so the headers reach every reply under /docs (the page, its scripts, the document) and nothing else.
  await app.register(async (docs) => {
    docs.addHook('onSend', async (_request, reply) => {
      securityHeaders({ setHeader: (name, value) => reply.header(name, value) }, DOCS_CSP);
    });
    await docs.register(fastifySwaggerUi, {
      routePrefix: '/docs',
      theme: { title: 'agentd API reference', css: [{ filename: 'agentd.css', content: DOCS_CSS }], js: [{ filename: 'agentd.js', content: DOCS_JS }] },
      uiConfig: {
        // Swagger's top bar is a box to load any other document (unlabelled, its logo without alt text), which this page has no use for.
        layout: 'BaseLayout',
        // A deep link puts a link inside each operation's toggle button, which a screen reader cannot reach, in too small a target.
        deepLinking: false,
        docExpansion: 'list',
        defaultModelsExpandDepth: 0,
        tryItOutEnabled: false,
      },
    });
  });
}
