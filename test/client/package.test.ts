import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, template, type Harness } from '../support/harness.ts';

/**
 * The client as a package consumer gets it: `agentd/client` (package.json "exports" → dist/client),
 * built from the sources by tsconfig.client.json, importable by name, working against a server,
 * and free of Node built-ins and bare imports, so it bundles for a browser as it is.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const distClient = path.join(root, 'dist/client');

let h: Harness;

beforeAll(() => {
  // What `npm run build` (and so `npm ci`, through `prepare`) does.
  execFileSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.client.json'], { cwd: root, stdio: 'pipe' });
}, 120_000);

beforeAll(async () => {
  h = await startHarness({ script: (req) => ({ text: `packaged answer to ${req.messages.at(-1)?.content}` }) });
});
afterAll(async () => h?.close());

describe('package.json exports', () => {
  it('maps agentd/client to the built client', () => {
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
    expect(pkg.name).toBe('agentd');
    expect(pkg.exports['./client']).toEqual({ types: './dist/client/index.d.ts', default: './dist/client/index.js' });
    expect(existsSync(path.join(root, pkg.exports['./client'].default))).toBe(true);
    expect(existsSync(path.join(root, pkg.exports['./client'].types))).toBe(true);
  });

  it('import("agentd/client") exports createClient and AgentdError, and runs a turn', async () => {
    const mod = await import('agentd/client');
    expect(typeof mod.createClient).toBe('function');
    expect(typeof mod.AgentdError).toBe('function');
    expect(typeof mod.invokeMany).toBe('function');
    expect(typeof mod.readFrames).toBe('function');

    const client = mod.createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
    const reply = await client.invoke({ session_id: 'packaged-1', data: { inputs: { messages: [{ role: 'user', content: 'from the package' }] }, parameters: { agent: template() as any } } });
    expect(reply.session_id).toBe('packaged-1');
    expect(reply.data?.outputs.stop_reason).toBe('end_turn');
    expect((reply.data?.outputs.messages.at(-1) as any).content).toBe('packaged answer to from the package');

    // Its errors are its own AgentdError class.
    const error = await client.invoke({ session_id: 'bad id', data: { inputs: { messages: [{ role: 'user', content: 'x' }] } } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(mod.AgentdError);
    expect((error as InstanceType<typeof mod.AgentdError>).status).toMatchObject({ code: 400, type: 'invalid-session-id' });
  });

  it('resolves to dist/client/index.js under plain Node too (package self-reference)', () => {
    const out = execFileSync(
      process.execPath,
      ['--input-type=module', '-e', "const m = await import('agentd/client'); console.log(JSON.stringify([import.meta.resolve('agentd/client'), Object.keys(m).sort()]))"],
      { cwd: root, encoding: 'utf8' },
    );
    const [resolved, keys] = JSON.parse(out.trim());
    expect(fileURLToPath(resolved)).toBe(path.join(distClient, 'index.js'));
    expect(keys).toEqual(['AgentdError', 'allResults', 'asText', 'caseExpected', 'caseFailed', 'caseInput', 'caseOutput', 'compareRuns', 'createClient', 'invokeMany', 'meanScore', 'readFrames']);
  });
});

describe('published types', () => {
  /**
   * Type errors of consumer modules at the repository root (virtual files, never written), checked
   * in one program against dist's declarations, by file name.
   */
  function typeErrors(sources: Record<string, string>): Record<string, string[]> {
    const files = new Map(Object.entries(sources).map(([name, text]) => [path.join(root, 'test/client', name), text]));
    const config = ts.getParsedCommandLineOfConfigFile(path.join(root, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })!;
    const options = { ...config.options, noEmit: true };
    const host = ts.createCompilerHost(options);
    const getSourceFile = host.getSourceFile.bind(host);
    const fileExists = host.fileExists.bind(host);
    const readFile = host.readFile.bind(host);
    host.getSourceFile = (name, language, ...rest) => (files.has(name) ? ts.createSourceFile(name, files.get(name)!, language) : getSourceFile(name, language, ...rest));
    host.fileExists = (name) => files.has(name) || fileExists(name);
    host.readFile = (name) => files.get(name) ?? readFile(name);
    const program = ts.createProgram([...files.keys()], options, host);
    const declarations = program.getSourceFiles().map((f) => path.relative(root, f.fileName)).filter((f) => f.startsWith('dist/'));
    // The package's types come from dist (declarations only), never from src.
    expect(declarations).toContain('dist/client/index.d.ts');
    expect(declarations).toContain('dist/contract/invoke.d.ts');
    expect(declarations.every((f) => f.endsWith('.d.ts'))).toBe(true);
    expect(program.getSourceFiles().some((f) => path.relative(root, f.fileName).startsWith('src/'))).toBe(false);
    const errors: Record<string, string[]> = Object.fromEntries(Object.keys(sources).map((name) => [name, []]));
    for (const d of ts.getPreEmitDiagnostics(program)) {
      const name = d.file ? path.relative(path.join(root, 'test/client'), d.file.fileName) : '(global)';
      (errors[name] ??= []).push(ts.flattenDiagnosticMessageText(d.messageText, ' '));
    }
    return errors;
  }

  it("a consumer of 'agentd/client' typechecks against dist's declarations, with real (not any) types", () => {
    const usage = `
      import { createClient, AgentdError, type Outcome } from 'agentd/client';
      const client = createClient({ baseUrl: 'http://127.0.0.1:8787', apiKey: 'k', projectId: 'p' });
      export async function run(): Promise<string | undefined> {
        const reply = await client.invoke({ session_id: 's', data: { inputs: { messages: [{ role: 'user', content: 'hi' }] } } });
        const outcomes: Outcome[] = await client.invokeMany([{ data: { inputs: { messages: [] } } }], { concurrency: 2, session: 'shared' });
        for await (const frame of client.stream({}, { transport: 'ndjson' })) if (frame.type === 'done') break;
        const created = await client.workflows.create({ slug: 'wf' });
        const error: AgentdError | undefined = outcomes[0] && !outcomes[0].ok ? outcomes[0].error : undefined;
        return reply.data?.outputs.stop_reason ?? created.workflow.slug ?? error?.status.type;
      }
    `;
    // Misuse is caught: the types are the contract's, not any.
    const misuse = `
      import { createClient } from 'agentd/client';
      const client = createClient({ baseUrl: 'x', apiKey: 'k', projectId: 'p' });
      export const wrong = async (): Promise<number> => (await client.invoke({})).session_id;
      export const badMode = () => client.invokeMany([], { session: 'together' });
    `;
    const errors = typeErrors({ '__usage__.ts': usage, '__misuse__.ts': misuse });
    expect(Object.keys(errors).sort()).toEqual(['__misuse__.ts', '__usage__.ts']);
    expect(errors['__usage__.ts']).toEqual([]);
    expect(errors['__misuse__.ts']).toHaveLength(2);
    expect(errors['__misuse__.ts']!.join('\n')).toMatch(/not assignable to type 'number'/);
    expect(errors['__misuse__.ts']!.join('\n')).toMatch(/"together"/);
  });
});

describe('browser safety', () => {
  /** Every module specifier in a built file: static imports and re-exports, and dynamic imports. */
  function specifiers(source: string): string[] {
    const found: string[] = [];
    for (const m of source.matchAll(/^\s*(?:import|export)\s[^;]*?\sfrom\s*["']([^"']+)["']/gm)) found.push(m[1]!);
    for (const m of source.matchAll(/^\s*import\s*["']([^"']+)["']/gm)) found.push(m[1]!);
    for (const m of source.matchAll(/\bimport\s*\(\s*["']([^"']+)["']\s*\)/g)) found.push(m[1]!);
    return found;
  }

  it('the import graph from dist/client/index.js holds only relative imports: no node: built-ins, no bare packages', () => {
    const seen = new Set<string>();
    const outside: Array<{ file: string; specifier: string }> = [];
    const queue = [path.join(distClient, 'index.js')];
    while (queue.length > 0) {
      const file = queue.shift()!;
      if (seen.has(file)) continue;
      seen.add(file);
      const source = readFileSync(file, 'utf8');
      for (const specifier of specifiers(source)) {
        if (specifier.startsWith('./') || specifier.startsWith('../')) {
          const target = path.resolve(path.dirname(file), specifier);
          expect(existsSync(target), `${path.relative(root, file)} imports ${specifier}, which was not built`).toBe(true);
          queue.push(target);
        } else {
          outside.push({ file: path.relative(root, file), specifier });
        }
      }
      // Nothing reaches for Node's globals either.
      expect(source, path.relative(root, file)).not.toMatch(/\bnode:|\brequire\(|\bprocess\.|\bBuffer\./);
    }
    expect(outside).toEqual([]);
    expect([...seen].map((f) => path.relative(distClient, f)).sort()).toEqual(['client.js', 'errors.js', 'evaluation-cases.js', 'frames.js', 'index.js', 'invoke-many.js', 'transport.js']);
  });

  it('the sources import only types from outside src/client, so nothing else is bundled', () => {
    const sources = ['index.ts', 'client.ts', 'invoke-many.ts', 'transport.ts', 'frames.ts', 'errors.ts'];
    for (const name of sources) {
      const source = readFileSync(path.join(root, 'src/client', name), 'utf8');
      for (const m of source.matchAll(/^import\s+(type\s+)?[^;]*?from\s*'([^']+)'/gm)) {
        if (!m[2]!.startsWith('./')) expect(m[1], `${name} imports ${m[2]} at runtime`).toBe('type ');
      }
    }
  });
});
