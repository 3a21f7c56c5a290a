import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/**
 * The console's build: web/ → dist/console, served by agentd at `/` (src/http/console.ts). It
 * imports the project's own client from src/client, type-only contract imports included.
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
  server: { fs: { allow: [here('..')] } },
});
