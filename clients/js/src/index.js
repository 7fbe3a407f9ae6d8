// @airlock/client: the JavaScript client of airlock, a self-hosted code interpreter. No
// dependencies; the global fetch (Node 18+, Deno, Bun, browsers), and node:http for unix:
// URLs in Node. docs/CLIENTS.md has the guide, index.d.ts the types.
export { Sandbox, Files, run } from './sandbox.js';
export { Execution, Output } from './models.js';
export {
  AirlockError,
  BadRequestError,
  AuthError,
  NotFoundError,
  ConflictError,
  LimitError,
  ConnectError,
  RequestTimeoutError,
  ExecutionError,
} from './errors.js';
export { DEFAULT_URL } from './transport.js';
