// A loopback HTTP proxy that adds the daemon's bearer token to every request and changes
// nothing else: method, path, body and every header (Host and Origin included) reach the
// daemon as the client sent them, so the daemon's own Host/Origin checks are what is tested.
// It exists because the conformance runner cannot send an Authorization header.
import http from 'node:http';

export function startAuthProxy({ target, token, port = 0, host = '127.0.0.1' }) {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers, authorization: `Bearer ${token}` };
    const out = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers,
        // Host is forwarded as the client sent it (setHost: false keeps node from replacing it).
        setHost: false,
      },
      (up) => {
        res.writeHead(up.statusCode, up.headers);
        up.pipe(res);
      },
    );
    out.on('error', (err) => {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`proxy: ${err.message}`);
    });
    req.pipe(out);
  });
  return new Promise((resolve, reject) => {
    server.on('error', reject);
    server.listen(port, host, () => {
      const { port: bound } = server.address();
      resolve({
        url: `http://${host}:${bound}`,
        port: bound,
        close: () => new Promise((r) => server.close(() => r())),
      });
    });
  });
}
