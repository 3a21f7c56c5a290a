// `node --import` this: every module the process loads, written to LOADED_MODULES_FILE (one URL a
// line) when it exits, for test/cli/serve.test.ts.
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const loaded = [];
registerHooks({
  load(url, context, next) {
    loaded.push(url);
    return next(url, context);
  },
});
process.on('exit', () => writeFileSync(process.env.LOADED_MODULES_FILE, loaded.join('\n')));
