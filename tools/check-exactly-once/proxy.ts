// The runner reaches the broker through this proxy, which injects the faults
// of the network between them:
//   - a lost cycle answer: the cycle request reaches the broker and commits
//     (or not), then the runner's connection is cut before the answer: the
//     runner cannot know whether it committed;
//   - a stall: a cycle request is held longer than the source's lease before
//     it is forwarded, so the lease has expired when it arrives;
//   - a broker restart: the target moves to the new broker; requests in
//     between get their connection reset.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FaultProxy {
  url: string;
  /** Probability (0..1) that a cycle's answer is lost after the broker got it. */
  lostRate: number;
  /** Holds the next `n` cycle requests for `stallMs` each before forwarding them. */
  stall(n: number, stallMs: number): void;
  /** Where requests go; undefined = the broker is down (connections are reset). */
  target: string | undefined;
  counts: { lost: number; stalled: number; reset: number };
  close(): Promise<void>;
}

const isCycle = (req: http.IncomingMessage) => req.method === 'POST' && (req.url ?? '').startsWith('/streams/v1/cycle');

export async function startFaultProxy(target: string, random: () => number): Promise<FaultProxy> {
  let stalls: { left: number; ms: number } = { left: 0, ms: 0 };
  const agent = new http.Agent({ keepAlive: true });
  const proxy: FaultProxy = {
    url: '',
    lostRate: 0,
    target,
    counts: { lost: 0, stalled: 0, reset: 0 },
    stall: (n, ms) => {
      stalls = { left: n, ms };
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      agent.destroy();
    },
  };
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const cycle = isCycle(req);
    if (cycle && stalls.left > 0) {
      stalls.left -= 1;
      proxy.counts.stalled += 1;
      await new Promise((r) => setTimeout(r, stalls.ms));
    }
    const to = proxy.target;
    if (!to) {
      proxy.counts.reset += 1;
      req.socket.destroy();
      return;
    }
    const loseAnswer = cycle && random() < proxy.lostRate;
    const upstream = http.request(new URL(req.url ?? '/', to), { method: req.method, headers: { ...req.headers, host: new URL(to).host }, agent }, (answer) => {
      const body: Buffer[] = [];
      answer.on('data', (d: Buffer) => body.push(d));
      answer.on('end', () => {
        if (loseAnswer) {
          proxy.counts.lost += 1;
          req.socket.destroy();
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        res.end(Buffer.concat(body));
      });
      answer.on('error', () => req.socket.destroy());
    });
    upstream.on('error', () => {
      proxy.counts.reset += 1;
      req.socket.destroy();
    });
    upstream.end(Buffer.concat(chunks));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}
