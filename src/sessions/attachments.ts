import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { removeWritten } from '../agent/tools/files.ts';
import type { Message } from '../contract/messages.ts';
import { AppError, isAppError } from '../errors.ts';
import type { Attachment } from '../stream/inbound-files.ts';
import { compareFile, writeUpload } from './files.ts';

/**
 * Files attached to user messages reach the agent through its session folder, the same for every
 * engine: each is written under `attachments/`, and its message gets a line naming it. A `useChat`
 * page posts the whole conversation each turn, so both are deterministic: a file already there with
 * the same name and bytes is left as it is, and the line reads as it did, so the model's history
 * (and a provider's prompt cache) does not change between turns.
 */

/** The folder, inside the session folder, that attachments go to. */
export const ATTACHMENTS_FOLDER = 'attachments';

/** Room under a file system's 255 bytes for the `-<8 hex>-<n>` a name taken by other files gets. */
const MAX_NAME_BYTES = 200;

/** How many files, and how large each, one request may put into the session folder. */
export interface AttachmentLimits {
  /** AGENTD_MAX_UPLOAD: as large as an upload may be. */
  maxUploadBytes: number;
  /** AGENTD_MAX_ATTACHMENTS: each is a file written (or compared) before the turn starts. */
  maxAttachments: number;
}

/**
 * Refuses what a request may not attach: a file larger than an upload may be, or more files than
 * AGENTD_MAX_ATTACHMENTS. The count is the request's, not a message's: `useChat` re-posts every
 * earlier file with each message, and each is compared with the folder again, so it is what
 * bounds the work (and the files) one request makes, as a provider bounds the images of one request.
 */
export function checkAttachments(attachments: readonly Attachment[], limits: AttachmentLimits): void {
  const over = attachments[limits.maxAttachments];
  if (over) {
    throw new AppError(
      'payload-too-large',
      `the file at ${over.at} is one more than the ${limits.maxAttachments} files a request may attach (AGENTD_MAX_ATTACHMENTS); ` +
        'a conversation that carries more can go on in a new session, or upload them (PUT /api/sessions/{session_id}/files) and name them in a message',
    );
  }
  for (const attachment of attachments) {
    if (attachment.bytes.length > limits.maxUploadBytes) {
      throw new AppError(
        'payload-too-large',
        `the file at ${attachment.at} has ${attachment.bytes.length} bytes, more than the ${limits.maxUploadBytes} a file put into the session folder may have (AGENTD_MAX_UPLOAD)`,
      );
    }
  }
}

export interface Delivered {
  /** The messages, each with a line per file after its text. */
  history: Message[];
  /** Removes what the delivery wrote: a turn refused before it starts leaves the folder as it found it. */
  undo(): Promise<void>;
}

/**
 * Writes `attachments` into `folder` and answers `messages` with a line for each after its
 * message's text, `[attached file: attachments/report.pdf (application/pdf, 12,345 bytes)]`. A
 * file that cannot be written undoes the ones before it.
 */
export async function deliverAttachments(folder: string, messages: readonly Message[], attachments: readonly Attachment[], limits: AttachmentLimits): Promise<Delivered> {
  checkAttachments(attachments, limits);
  const written: string[] = [];
  const hadFolder = await fs.lstat(path.join(folder, ATTACHMENTS_FOLDER)).then(() => true, () => false);
  const undo = () => removeWritten(folder, written, hadFolder ? [] : [ATTACHMENTS_FOLDER]);
  const lines = new Map<number, string[]>();
  try {
    for (const attachment of attachments) {
      const placed = await place(folder, attachment, written);
      const line = `[attached file: ${placed} (${attachment.mediaType}, ${grouped(attachment.bytes.length)} bytes)]`;
      lines.set(attachment.message, [...(lines.get(attachment.message) ?? []), line]);
    }
  } catch (error) {
    await undo();
    throw error;
  }
  const history = messages.map((message, i) => {
    const more = lines.get(i);
    return more ? { ...message, content: [message.content, ...more].filter((text) => text !== '').join('\n') } : message;
  });
  return { history, undo };
}

/** How many names with the hash a file tries before its request is refused (each taken by another file). */
const HASHED_NAMES = 10;

/**
 * Where the file goes: its own name, unless a different file holds that name (an earlier attachment
 * of the same name, or the agent's edit of it); then the name with the first 8 hex digits of the
 * bytes' SHA-256, and `-2`, `-3`… after it when other files hold those too, so the same bytes find
 * the same place every turn. A file already there is never written over: what the agent made of an
 * attachment stays, and a refused turn's undo removes only files the delivery made.
 */
async function place(folder: string, attachment: Attachment, written: string[]): Promise<string> {
  const name = fileName(attachment.filename, attachment.mediaType);
  const ext = path.extname(name);
  const hash = createHash('sha256').update(attachment.bytes).digest('hex').slice(0, 8);
  const stem = `${ATTACHMENTS_FOLDER}/${name.slice(0, name.length - ext.length)}-${hash}`;
  const candidates = [`${ATTACHMENTS_FOLDER}/${name}`, `${stem}${ext}`, ...Array.from({ length: HASHED_NAMES - 1 }, (_, i) => `${stem}-${i + 2}${ext}`)];
  for (const candidate of candidates) {
    const found = await naming(attachment, () => compareFile(folder, candidate, attachment.bytes));
    if (found === 'same') return candidate;
    if (found === 'missing') {
      await naming(attachment, () => writeUpload(folder, candidate, attachment.bytes));
      written.push(candidate);
      return candidate;
    }
  }
  throw new AppError(
    'conflict',
    `the file at ${attachment.at} cannot be put into the session folder: other files hold ${candidates[0]} and the ${HASHED_NAMES} names it would take after it (${candidates[1]}…); ` +
      'attach it under another name, or have the agent rename or remove those files',
  );
}

/** A refusal of the folder (a symlink, a file where `attachments/` should be) names the part too. */
async function naming<T>(attachment: Attachment, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (!isAppError(error)) throw error;
    throw new AppError(error.type, `the file at ${attachment.at} cannot be put into the session folder: ${error.message}`, { cause: error });
  }
}

/**
 * A safe single path component from the caller's name: its last part (a browser sends only that; a
 * hand-made `a/b` or `C:\dir\b` means `b`), in NFC (macOS hands a page `café` decomposed, others
 * composed: one name, one file), without control characters, without the bidirectional controls
 * that make `report\u202Efdp.exe` read as `reportexe.pdf`, without leading dots or spaces (no
 * hidden file, and never `.` or `..`: `attachments/.` is the folder itself), at most MAX_NAME_BYTES.
 * Without a usable name, `attachment` and an extension for the media type.
 */
export function fileName(filename: string | undefined, mediaType: string): string {
  const last = filename?.split(/[/\\]/).at(-1) ?? '';
  const cleaned = last
    .normalize('NFC')
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, '')
    .replace(/^[.\s]+/, '')
    .trim();
  return cleaned ? shortened(cleaned) : `attachment${extensionFor(mediaType)}`;
}

function shortened(name: string): string {
  if (Buffer.byteLength(name) <= MAX_NAME_BYTES) return name;
  const ext = path.extname(name);
  const keep = Buffer.byteLength(ext) <= 16 ? ext : '';
  let stem = '';
  let bytes = Buffer.byteLength(keep);
  for (const char of name.slice(0, name.length - keep.length)) {
    bytes += Buffer.byteLength(char);
    if (bytes > MAX_NAME_BYTES) break;
    stem += char;
  }
  return stem + keep;
}

const EXTENSIONS: Record<string, string> = {
  'application/json': '.json',
  'application/pdf': '.pdf',
  'application/zip': '.zip',
  'image/gif': '.gif',
  'image/jpeg': '.jpg',
  'image/png': '.png',
  'image/svg+xml': '.svg',
  'image/webp': '.webp',
  'text/csv': '.csv',
  'text/html': '.html',
  'text/markdown': '.md',
  'text/plain': '.txt',
};

/** The usual extension, else a short plain subtype (`image/bmp` → `.bmp`), else none. */
function extensionFor(mediaType: string): string {
  const known = EXTENSIONS[mediaType];
  if (known) return known;
  const subtype = mediaType.split('/')[1] ?? '';
  return /^[a-z0-9]{1,8}$/.test(subtype) ? `.${subtype}` : '';
}

/** 12345 → "12,345": one way on every machine, unlike toLocaleString. */
function grouped(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}
