import { ToolError } from './tool-error.ts';

/**
 * A matcher for "/"-separated relative paths. Supports `*`, `?`, `**`, `[abc]`, `[!abc]` and
 * `{a,b}`. A pattern without "/" matches the base name at any depth (as ripgrep's --glob and
 * .gitignore do), so `*.ts` finds every TypeScript file; `src/*.ts` is anchored.
 */
export function globMatcher(pattern: string): (relPath: string) => boolean {
  let source = pattern.replace(/^(\.\/)+/, '');
  if (source === '' || source.startsWith('/')) {
    throw new ToolError(`glob "${pattern}" must be a relative pattern such as "**/*.ts"; put the folder in path`);
  }
  if (source.endsWith('/')) source = source.slice(0, -1);
  const regex = new RegExp(`^${translate(source, pattern)}$`);
  if (!source.includes('/')) {
    return (relPath) => regex.test(relPath.slice(relPath.lastIndexOf('/') + 1));
  }
  return (relPath) => regex.test(relPath);
}

function translate(glob: string, original: string): string {
  let out = '';
  let braces = 0;
  for (let i = 0; i < glob.length; i += 1) {
    const c = glob[i] as string;
    if (c === '*') {
      if (glob[i + 1] === '*') {
        const atSegmentStart = i === 0 || glob[i - 1] === '/';
        const atSegmentEnd = i + 2 === glob.length || glob[i + 2] === '/';
        if (atSegmentStart && atSegmentEnd) {
          if (glob[i + 2] === '/') {
            out += '(?:[^/]*/)*';
            i += 2;
          } else {
            out += '.*';
            i += 1;
          }
          continue;
        }
      }
      out += '[^/]*';
    } else if (c === '?') {
      out += '[^/]';
    } else if (c === '[') {
      const end = glob.indexOf(']', i + 2);
      if (end === -1) {
        out += '\\[';
        continue;
      }
      let body = glob.slice(i + 1, end);
      const negate = body.startsWith('!') || body.startsWith('^');
      if (negate) body = body.slice(1);
      out += `[${negate ? '^' : ''}${body.replace(/[\\\]]/g, '\\$&')}]`;
      i = end;
    } else if (c === '{') {
      braces += 1;
      out += '(?:';
    } else if (c === '}' && braces > 0) {
      braces -= 1;
      out += ')';
    } else if (c === ',' && braces > 0) {
      out += '|';
    } else if (c === '\\' && i + 1 < glob.length) {
      i += 1;
      out += escape(glob[i] as string);
    } else {
      out += escape(c);
    }
  }
  if (braces > 0) throw new ToolError(`glob "${original}" has an unclosed "{"`);
  return out;
}

function escape(c: string): string {
  return c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
