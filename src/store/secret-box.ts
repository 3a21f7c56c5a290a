import { chmodSync, linkSync, mkdirSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import path from 'node:path';

/**
 * Encryption at rest for values the server must read back (project connections' API keys):
 * AES-256-GCM with a fresh random 12-byte IV per value. A sealed value is base64 of
 * `iv | tag | ciphertext`. The caller passes a context (the row it belongs to) that is
 * authenticated with it, so a sealed value copied into another row does not open there.
 */

export const SECRET_KEY_FILE = 'secret.key';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HOW_TO_MAKE = 'make one with: openssl rand -base64 32';
/** `${SECRET_KEY_FILE}.<pid>.<12 hex digits>.tmp`, as loadSecretKey names its temporary file. */
const TEMPORARY = /^secret\.key\.(\d+)\.[0-9a-f]{12}\.tmp$/;

export interface SecretBox {
  seal(plaintext: string, context: string): string;
  /** Throws SecretBoxMismatch when the value was sealed under another key (or altered). */
  open(sealed: string, context: string): string;
}

export class SecretBoxMismatch extends Error {
  constructor() {
    super("a stored secret cannot be decrypted with this server's secret key");
    this.name = 'SecretBoxMismatch';
  }
}

/**
 * Reads a 32-byte key written as hex or base64 (either alphabet). The message never repeats the
 * value: it may be a real key with a typo.
 */
export function parseSecretKey(raw: string, source: string): Buffer {
  const text = raw.trim();
  let key: Buffer | undefined;
  if (/^[0-9a-fA-F]{64}$/.test(text)) key = Buffer.from(text, 'hex');
  else if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) key = Buffer.from(text.replace(/=$/, ''), 'base64');
  if (key?.length !== KEY_BYTES) {
    throw new Error(`${source} must be ${KEY_BYTES} random bytes written as base64 or hex (${text.length} characters given); ${HOW_TO_MAKE}`);
  }
  return key;
}

/**
 * The key from AGENTD_SECRET_KEY when set; otherwise `<dataDir>/secret.key`, generated on the
 * first start (mode 0600) and read back on every later one. A `:memory:` data folder keeps no
 * file, and neither does the key: both end with the process.
 */
export function loadSecretKey(dataDir: string, configured: Buffer | undefined): Buffer {
  if (configured) return configured;
  if (dataDir === ':memory:') return randomBytes(KEY_BYTES);
  const file = path.join(path.resolve(dataDir), SECRET_KEY_FILE);
  removeLeftTemporaries(file);
  const existing = readKeyFile(file);
  if (existing) return existing;
  mkdirSync(path.dirname(file), { recursive: true });
  // Written whole under a temporary name and linked into place, which fails if the name exists:
  // two servers starting at once on one folder end up with the same key, never half a file.
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(tmp, `${randomBytes(KEY_BYTES).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  try {
    chmodSync(tmp, 0o600);
    linkSync(tmp, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    unlinkSync(tmp);
  }
  return readKeyFile(file)!;
}

/**
 * A start killed between writing its temporary key file and removing it left the file behind: a
 * copy of a key, or of one never used. Those of processes still running are theirs to remove.
 */
function removeLeftTemporaries(file: string): void {
  const folder = path.dirname(file);
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  for (const name of names) {
    const pid = TEMPORARY.exec(name)?.[1];
    if (pid !== undefined && !running(Number(pid))) rmSync(path.join(folder, name), { force: true });
  }
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readKeyFile(file: string): Buffer | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  return parseSecretKey(text, `the secret key file ${file}`);
}

export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== KEY_BYTES) throw new Error(`a secret key is ${KEY_BYTES} bytes, got ${key.length}`);
  return {
    seal(plaintext, context) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(context, 'utf8'));
      const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64');
    },
    open(sealed, context) {
      const bytes = Buffer.from(sealed, 'base64');
      if (bytes.length < IV_BYTES + TAG_BYTES) throw new SecretBoxMismatch();
      const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(context, 'utf8'));
      decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      try {
        return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
      } catch {
        throw new SecretBoxMismatch();
      }
    },
  };
}
