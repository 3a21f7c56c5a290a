import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/**
 * The console's build: web/ → dist/console, served by agentd at `/` (src/http/console.ts). It
 * imports the project's own client from src/client, type-only contract imports included, and the
 * server's own native → UI message conversion (src/stream/native-to-ui.ts, browser-safe), so a turn
 * the chat did not follow reads there as its stream would have built it.
 */
export default defineConfig({
  root: here('.'),
  base: '/',
  plugins: [react()],
  build: {
    outDir: here('../dist/console'),
    emptyOutDir: true,
    // A strict CSP (no inline scripts): the module preload helper goes into the bundle, not the page.
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 1500,
  },
  // `npx vite --config web/vite.config.ts`: the console with hot reload, its API calls sent to an
  // agentd on AGENTD_URL (default 127.0.0.1:8787), so the page and the API share one origin.
  server: {
    fs: { allow: [here('..')] },
    proxy: Object.fromEntries(['/api', '/services', '/docs', '/openapi.json'].map((path) => [path, process.env.AGENTD_URL ?? 'http://127.0.0.1:8787'])),
  },
});
