import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A real HTTP server standing for a model or an MCP server behind the harness relay: its `/v1` url, and the headers of each request it got. */
export interface Upstream {
  url: string;
  seen: http.IncomingHttpHeaders[];
  close(): void;
}

export async function startUpstream(answer: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<Upstream> {
  const seen: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.headers);
    answer(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const close = () => {
    // An answer left hanging on purpose (a stalled stream) would hold the server open.
    server.closeAllConnections();
    server.close();
  };
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, seen, close };
}
