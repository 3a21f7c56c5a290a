import { parentPort } from 'node:worker_threads';
import type { RegexTestRequest, RegexTestResult } from './regex-test.ts';

/** Runs regex evaluators' tests for regex-test.ts, one after another. */

// A run scores every case with the same few patterns: each is compiled once.
const compiled = new Map<string, RegExp>();

parentPort!.on('message', ({ id, pattern, flags, text }: RegexTestRequest) => {
  let result: RegexTestResult;
  try {
    const key = `${flags}/${pattern}`;
    let regex = compiled.get(key);
    if (!regex) {
      if (compiled.size >= 100) compiled.clear();
      regex = new RegExp(pattern, flags);
      compiled.set(key, regex);
    }
    regex.lastIndex = 0;
    result = { id, matched: regex.test(text) };
  } catch (error) {
    result = { id, error: (error as Error).message };
  }
  parentPort!.postMessage(result);
});
