import { parentPort, workerData } from 'node:worker_threads';

/**
 * A fetch client on a thread of its own, for uploads the server refuses half-way. On the server's
 * thread the client would write only when the server yields, which hides what a real client
 * sees: a reply racing the rest of its upload.
 */

export interface Upload {
  url: string;
  method: string;
  headers: Record<string, string>;
  /** Bytes to send. */
  size: number;
  /** Send as a stream (chunked, length unknown) rather than with a Content-Length. */
  streamed: boolean;
}

export type UploadResult = { status: number; headers: Record<string, string>; text: string } | { error: string };

function body(size: number, streamed: boolean): BodyInit {
  const bytes = new Uint8Array(size).fill(0x78);
  if (!streamed) return bytes;
  let at = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= bytes.length) return controller.close();
      controller.enqueue(bytes.subarray(at, (at += 64 * 1024)));
    },
  });
}

const results: UploadResult[] = [];
for (const upload of workerData as Upload[]) {
  try {
    const res = await fetch(upload.url, { method: upload.method, headers: upload.headers, body: body(upload.size, upload.streamed), duplex: 'half' } as RequestInit);
    results.push({ status: res.status, headers: Object.fromEntries(res.headers), text: await res.text() });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    results.push({ error: `${(error as Error).message}: ${cause?.code ?? cause?.message}` });
  }
}
parentPort!.postMessage(results);
