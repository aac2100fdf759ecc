// A real authorization server that is not Steward's, for the sign-in
// envtests (tests/tests/it/oauth_oidc.rs): `oidc-provider` (OpenID
// Certified, pinned in .ci/run, run on Node 22) with dynamic client
// registration, PKCE, resource indicators (RFC 8707), refresh-token
// rotation, revocation and the device authorization grant; and an MCP
// server protected by it (the official TypeScript SDK's server, stateless
// streamable HTTP), which answers 401 with its protected resource metadata
// and accepts only access tokens the provider issued for it.
//
// The user step is scripted over HTTP: GET /interaction/UID shows a form;
// POST it with `login=NAME` and that account signs in and consents at once.
//
// Usage: node oidc_server.mjs STATE_DIR, with $OIDC_PROVIDER_DIR the
// installed oidc-provider package and $STEWARD_SDK_DIR the TypeScript SDK's.
// Writes STATE_DIR/ports.json ({issuer, mcp}) once listening, and appends
// one JSON line per token request to STATE_DIR/tokens.jsonl ({grant_type,
// account, ok}). Access tokens live $ACCESS_TTL seconds (default 3600).
// While STATE_DIR/token-down exists, the token endpoint answers 503.
// With $STATIC_CLIENT_SECRET and $STATIC_REDIRECT it also knows a client
// registered by hand: `steward-static`, that secret (client_secret_basic),
// that redirect URI.
// With $STEP_UP_TOOL and $STEP_UP_SCOPE the server offers one more tool of
// that name, which needs that scope too: a call to it with a token without
// it is refused before it runs (403, `insufficient_scope` naming that scope
// alone), as is any request with a token without `mcp:read`. Every run of
// a tool is appended to STATE_DIR/runs.jsonl ({tool, account, scope}).
// The same server speaks the legacy HTTP+SSE transport too (a `url`
// entry): GET /mcp/sse opens a session's stream, whose messages are POSTed
// to /mcp/messages; every request's token is checked as for /mcp.

import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [stateDir] = process.argv.slice(2);
const from = (dir, rel) => import(pathToFileURL(path.join(dir, rel)).href);
const sdk = (rel) => from(process.env.STEWARD_SDK_DIR, rel);
const { default: Provider } = await from(process.env.OIDC_PROVIDER_DIR, 'lib/index.js');
const { McpServer } = await sdk('dist/esm/server/mcp.js');
const { StreamableHTTPServerTransport } = await sdk('dist/esm/server/streamableHttp.js');
const { SSEServerTransport } = await sdk('dist/esm/server/sse.js');

const accessTtl = Number(process.env.ACCESS_TTL || 3600);
const stepUpTool = process.env.STEP_UP_TOOL;
const stepUpScope = process.env.STEP_UP_SCOPE;
const resourceScopes = ['mcp:read', ...(stepUpScope ? [stepUpScope] : [])].join(' ');
const listen = (server) =>
  new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));

const asServer = http.createServer();
const mcpServer = http.createServer();
const asPort = await listen(asServer);
const mcpPort = await listen(mcpServer);
const issuer = `http://127.0.0.1:${asPort}`;
const resource = `http://127.0.0.1:${mcpPort}/mcp`;

const clients = process.env.STATIC_CLIENT_SECRET
  ? [{
      client_id: 'steward-static',
      client_secret: process.env.STATIC_CLIENT_SECRET,
      redirect_uris: [process.env.STATIC_REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    }]
  : [];

const provider = new Provider(issuer, {
  clients,
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  scopes: ['openid', 'offline_access', ...resourceScopes.split(' ')],
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    revocation: { enabled: true },
    deviceFlow: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, indicator) => {
        if (indicator !== resource) throw new Provider.errors.InvalidTarget();
        return { scope: resourceScopes, accessTokenTTL: accessTtl, accessTokenFormat: 'opaque' };
      },
    },
  },
  rotateRefreshToken: true,
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: ['steward-tests-only'] },
  ttl: { AccessToken: accessTtl, RefreshToken: 86400, Grant: 86400, Session: 86400, Interaction: 600, DeviceCode: 600 },
});

// Every token request, for the tests to count (never its tokens).
const tokenLog = path.join(stateDir, 'tokens.jsonl');
const record = (entry) => fs.appendFileSync(tokenLog, JSON.stringify(entry) + '\n');
provider.on('grant.success', (ctx) =>
  record({ grant_type: ctx.oidc.params.grant_type, account: ctx.oidc.accountId ?? null, ok: true }));
provider.on('grant.error', (ctx, error) =>
  record({ grant_type: ctx.oidc.params?.grant_type ?? null, error: error.error, ok: false }));

const body = (req) =>
  new Promise((resolve) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => resolve(data));
  });

const callback = provider.callback();
asServer.on('request', async (req, res) => {
  // While STATE_DIR/token-down exists the token endpoint is down (503): a
  // transient failure, not a refusal.
  if (req.url === '/token' && fs.existsSync(path.join(stateDir, 'token-down'))) {
    record({ grant_type: null, unavailable: true, ok: false });
    res.statusCode = 503;
    return res.end('down for maintenance');
  }
  if (!req.url.startsWith('/interaction/')) return callback(req, res);
  try {
    const details = await provider.interactionDetails(req, res);
    if (req.method === 'GET') {
      res.setHeader('content-type', 'text/html');
      return res.end(
        `<form method="post" action="/interaction/${details.uid}"><input name="login"><button>Sign in</button></form>`,
      );
    }
    const form = new URLSearchParams(await body(req));
    const accountId = details.session?.accountId ?? form.get('login');
    const missing = details.prompt.details ?? {};
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId, clientId: details.params.client_id });
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    await provider.interactionFinished(
      req,
      res,
      { login: { accountId }, consent: { grantId } },
      { mergeWithLastSubmission: false },
    );
  } catch (error) {
    res.statusCode = 500;
    res.end(String(error));
  }
});

// The MCP server: `whoami` says which account the token belongs to.
const metadataPath = '/.well-known/oauth-protected-resource/mcp';
const challenge = () =>
  `Bearer resource_metadata="http://127.0.0.1:${mcpPort}${metadataPath}", scope="mcp:read"`;
mcpServer.on('request', async (req, res) => {
  if (req.url === metadataPath) {
    res.setHeader('content-type', 'application/json');
    return res.end(JSON.stringify({
      resource,
      authorization_servers: [issuer],
      scopes_supported: ['mcp:read'],
      bearer_methods_supported: ['header'],
    }));
  }
  if (!req.url.startsWith('/mcp')) {
    res.statusCode = 404;
    return res.end();
  }
  const header = req.headers.authorization ?? '';
  const token = header.startsWith('Bearer ') ? await provider.AccessToken.find(header.slice(7)) : undefined;
  const audience = token && [].concat(token.aud ?? []);
  if (!token || token.isExpired || !audience.includes(resource)) {
    res.statusCode = 401;
    res.setHeader('www-authenticate', challenge());
    return res.end(JSON.stringify({ error: 'invalid_token' }));
  }
  const parsed = req.method === 'POST' ? JSON.parse((await body(req)) || 'null') : undefined;
  if (stepUpTool) {
    const granted = (token.scope ?? '').split(' ');
    const calls = [].concat(parsed ?? []).some(
      (m) => m?.method === 'tools/call' && m.params?.name === stepUpTool);
    const needed = !granted.includes('mcp:read') ? 'mcp:read'
      : calls && !granted.includes(stepUpScope) ? stepUpScope : undefined;
    if (needed) {
      res.statusCode = 403;
      res.setHeader('www-authenticate',
        `Bearer error="insufficient_scope", scope="${needed}", resource_metadata="http://127.0.0.1:${mcpPort}${metadataPath}"`);
      return res.end(JSON.stringify({ error: 'insufficient_scope' }));
    }
  }
  if (req.url.startsWith('/mcp/sse') || req.url.startsWith('/mcp/messages')) {
    return sse(req, res, token, parsed);
  }
  const server = tools(() => token);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, parsed);
});

// The server's tools, run with the token `current()` gives.
function tools(current) {
  const ran = (tool, token) => fs.appendFileSync(path.join(stateDir, 'runs.jsonl'),
    JSON.stringify({ tool, account: token.accountId, scope: token.scope ?? '' }) + '\n');
  const server = new McpServer({ name: 'oidc-protected', version: '1.0.0' });
  server.registerTool('whoami', { description: 'The signed-in account' }, async () => {
    const token = current();
    ran('whoami', token);
    return { content: [{ type: 'text', text: token.accountId }] };
  });
  if (stepUpTool) {
    server.registerTool(stepUpTool, { description: 'Needs more scope' }, async () => {
      const token = current();
      ran(stepUpTool, token);
      return { content: [{ type: 'text', text: `${token.accountId} ${token.scope ?? ''}` }] };
    });
  }
  return server;
}

// HTTP+SSE sessions by id; a session's tools run with the token of the
// message that asked.
const sseSessions = new Map();
async function sse(req, res, token, parsed) {
  if (req.method === 'GET') {
    const transport = new SSEServerTransport('/mcp/messages', res);
    const session = { token, transport };
    sseSessions.set(transport.sessionId, session);
    res.on('close', () => sseSessions.delete(transport.sessionId));
    await tools(() => session.token).connect(transport);
    return;
  }
  const id = new URL(req.url, 'http://127.0.0.1').searchParams.get('sessionId');
  const session = sseSessions.get(id);
  if (!session) {
    res.statusCode = 404;
    return res.end();
  }
  session.token = token;
  await session.transport.handlePostMessage(req, res, parsed);
}

// Whole or not at all: written aside, then renamed into place.
fs.writeFileSync(path.join(stateDir, 'ports.json.new'), JSON.stringify({ issuer, mcp: resource }));
fs.renameSync(path.join(stateDir, 'ports.json.new'), path.join(stateDir, 'ports.json'));
