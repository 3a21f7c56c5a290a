import { FilePart } from '../contract/messages.ts';
import { AppError } from '../errors.ts';
import { invalidAt, parseAt } from './inbound-errors.ts';

/**
 * A file attached to a user message, decoded: what the turn writes into the session folder before
 * it starts (src/sessions/attachments.ts). Carried beside the converted messages, never in them, so
 * no copy of the bytes reaches a stored conversation.
 */
export interface Attachment {
  /** The index, among the converted native messages, of the user message it came with. */
  message: number;
  /** The part's JSON path, named by any later error about it. */
  at: string;
  /** `type/subtype`, lower case, no parameters. */
  mediaType: string;
  /** As the caller named it, when it did; made safe only where it becomes a path. */
  filename: string | undefined;
  bytes: Buffer;
}

/** A file part or block at `at`, of the native user message `message`, decoded. */
export function readAttachment(raw: unknown, at: string, message: number): Attachment {
  const part = parseAt(FilePart, raw, at);
  const data = decodeDataUrl(part.url, `${at}.url`);
  // A browser's File.type is '' for a file it has no type for; the data URL's then says octet-stream.
  const given = part.mediaType?.trim() ? mediaTypeOf(part.mediaType, `${at}.mediaType`) : undefined;
  return { message, at, mediaType: given ?? data.mediaType, filename: part.filename || undefined, bytes: data.bytes };
}

/** RFC 6838's restricted names, the parameters after `;` left off. */
const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/;

function mediaTypeOf(value: string, at: string): string {
  const type = value.split(';', 1)[0]!.trim().toLowerCase();
  if (!MEDIA_TYPE.test(type)) invalidAt(`${JSON.stringify(value.slice(0, 100))} is not a media type (type/subtype)`, at);
  return type;
}

/**
 * `data:[<media type>][;base64],<data>` (RFC 2397). Any other URL is refused: agentd fetches
 * nothing on a caller's behalf, so no request can make it reach a host the caller could not.
 */
function decodeDataUrl(url: string, at: string): { mediaType: string; bytes: Buffer } {
  if (!/^data:/i.test(url)) {
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
    throw new AppError(
      'invalid-messages',
      `the file at ${at} is ${scheme ? `a ${scheme}: URL` : 'not a data: URL'}, and agentd does not fetch URLs: send the file inline as a data: URL ` +
        '(what useChat makes of a FileList), or upload it into the session folder (PUT /api/sessions/{session_id}/files) and name it in the message',
    );
  }
  const comma = url.indexOf(',');
  if (comma < 0) invalidAt('a data: URL needs a "," before its data', at);
  const params = url.slice('data:'.length, comma).split(';');
  const base64 = params.length > 1 && params.at(-1)!.trim().toLowerCase() === 'base64';
  const type = params[0]!.trim();
  const mediaType = type ? mediaTypeOf(type, at) : 'text/plain';
  const data = url.slice(comma + 1);
  // As a browser reads one (WHATWG fetch, "data: URL processor"): percent-decoded first, so a
  // base64 body may spell its padding `%3D`.
  const bytes = base64 ? fromBase64(data.includes('%') ? fromPercentEncoded(data, at).toString('latin1') : data, at) : fromPercentEncoded(data, at);
  return { mediaType, bytes };
}

/**
 * Strict base64: Buffer.from skips what is not base64, so a mangled URL would become a file with
 * other bytes than were sent. Whitespace is allowed (line-wrapped base64), and so is the URL-safe
 * alphabet (`-` and `_`), which the AI SDK's own decoder takes: neither can mean anything else.
 */
function fromBase64(data: string, at: string): Buffer {
  const text = /\s/.test(data) ? data.replace(/\s+/g, '') : data;
  const bad = /[^A-Za-z0-9+/=_-]/.exec(text);
  const padding = text.indexOf('=');
  const valid = !bad && text.length % 4 !== 1 && (padding < 0 || (text.length - padding <= 2 && /^=+$/.test(text.slice(padding)) && text.length % 4 === 0));
  if (!valid) invalidAt(bad ? `the data: URL's base64 holds ${JSON.stringify(bad[0])}, which is not base64` : "the data: URL's base64 is cut short or badly padded", at);
  return Buffer.from(text, 'base64');
}

function fromPercentEncoded(data: string, at: string): Buffer {
  const pieces = data.split(/(%[0-9a-fA-F]{2})/);
  const bytes: Buffer[] = [];
  for (const piece of pieces) {
    if (/^%[0-9a-fA-F]{2}$/.test(piece)) bytes.push(Buffer.from([parseInt(piece.slice(1), 16)]));
    else if (piece.includes('%')) invalidAt('the data: URL holds a "%" that is not followed by two hex digits', at);
    else bytes.push(Buffer.from(piece, 'utf8'));
  }
  return Buffer.concat(bytes);
}
