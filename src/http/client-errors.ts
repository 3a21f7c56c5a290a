import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionError, FastifyInstance, FastifyReply } from 'fastify';
import { CONTRACT_VERSION } from '../contract/invoke.ts';
import { AppError } from '../errors.ts';
import { errorEnvelope } from './envelope.ts';

/**
 * How long, and how many more bytes, a client still sending after its error reply is read for
 * before the connection is cut. Closing a socket that has unread bytes makes the kernel answer
 * with a reset, which can overtake the reply: the client (fetch among them) then fails with
 * EPIPE or ECONNRESET and never reads why. Clients stop sending once they see the reply, so
 * these bounds only matter for one that does not; the byte bound is generous because what is
 * already in flight when the reply leaves (socket buffers, bandwidth times round trip) arrives
 * anyway, several MB even on loopback.
 */
const LINGER_MS = 2_000;
const LINGER_BYTES = 64 * 1024 * 1024;

const REQUEST_LINE = 'the request line must read "<METHOD> <path> HTTP/1.1"';
const BODY_LENGTH = 'send one valid Content-Length, or Transfer-Encoding: chunked, not both';

/** llhttp's error codes in words a client can act on; its own reason is added for precision. */
const NOT_HTTP: Record<string, string> = {
  HPE_INVALID_METHOD: REQUEST_LINE,
  HPE_INVALID_URL: REQUEST_LINE,
  HPE_INVALID_CONSTANT: REQUEST_LINE,
  HPE_INVALID_VERSION: REQUEST_LINE,
  HPE_INVALID_HEADER_TOKEN: 'a header name or value holds a character HTTP does not allow there, such as a control character',
  HPE_INVALID_CHUNK_SIZE: 'the chunked body is malformed',
  HPE_INVALID_TRANSFER_ENCODING: BODY_LENGTH,
  HPE_INVALID_CONTENT_LENGTH: BODY_LENGTH,
  HPE_UNEXPECTED_CONTENT_LENGTH: BODY_LENGTH,
};

function clientFailure(error: ConnectionError & { reason?: string }): AppError {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new AppError('headers-too-large', `the request headers are larger than the server accepts (${http.maxHeaderSize / 1024} KB); send fewer or smaller headers`);
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new AppError('payload-too-large', 'the chunk extensions of the request body are larger than the server accepts; send the body without them');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new AppError('request-timeout', 'the request did not arrive in time; send it again without pausing');
  }
  const reason = error.reason ?? error.message;
  const detail = error.code ? NOT_HTTP[error.code] : undefined;
  return new AppError('invalid-request', `the request is not valid HTTP: ${detail ? `${detail} (${reason})` : reason}`);
}

/** Sockets answered below, with the bytes read by then: their failed parser reports every later chunk again. */
const answered = new WeakMap<Socket, number>();

/**
 * Answers what Node's HTTP parser refuses before any route runs (a malformed request line or
 * header, headers over the size limit, a bad chunked body, a request too slow to arrive) in the
 * error envelope, written straight to the socket: there is no request or reply object.
 */
export function clientErrorHandler(this: FastifyInstance, error: ConnectionError, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const readBefore = answered.get(socket);
  if (readBefore !== undefined) {
    if (socket.bytesRead - readBefore > LINGER_BYTES) socket.destroy();
    return;
  }
  // Not the error itself: Node puts the raw bytes it read on it (`rawPacket`), headers and API key included.
  this.log.debug({ err: { type: error.name, message: error.message, code: error.code, reason: (error as { reason?: string }).reason } }, 'refused a request before any route ran');
  // Node's own rule: answer only if no reply has begun on this connection; a pipelined request can
  // fail while an earlier one's reply is still streaming.
  const current = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
  if (!socket.writable || current?.headersSent) {
    socket.destroy();
    return;
  }
  const failure = clientFailure(error);
  const body = JSON.stringify(errorEnvelope(failure, {}, false));
  const head = [
    `HTTP/1.1 ${failure.status} ${http.STATUS_CODES[failure.status]}`,
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`,
    `x-ag-version: ${CONTRACT_VERSION}`,
    'connection: close',
  ];
  answered.set(socket, socket.bytesRead);
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
  const cut = setTimeout(() => socket.destroy(), LINGER_MS).unref();
  socket.once('close', () => clearTimeout(cut));
}

/**
 * An error reply to a request whose body is still arriving (over the size limit, or refused before
 * it was read). Fastify asks for the connection to close, which would cut the upload mid-way;
 * instead the rest of the body is read and dropped, as Node does for any body a route leaves
 * unread, and the connection stays usable. A client sending more than the bounds allow is cut.
 */
export function discardUnreadBody(request: IncomingMessage, reply: FastifyReply): void {
  if (request.complete || request.socket.destroyed) return;
  reply.removeHeader('connection');
  let left = LINGER_BYTES;
  const cut = setTimeout(() => request.socket.destroy(), LINGER_MS).unref();
  request.on('data', (chunk: Buffer) => {
    left -= chunk.length;
    if (left < 0) request.socket.destroy();
  });
  request.once('close', () => clearTimeout(cut));
  request.resume();
}
