#!/usr/bin/env node
// A fake MCP server started by Node (steward-bench: what a sandbox costs a
// Node server), the twin of fake_mcp.py. Node's standard library only;
// newline-delimited JSON-RPC on stdio; reads the compiled fake's
// FAKE_MCP_CONFIG for its name, tools and prompts, and answers initialize,
// tools/list, prompts/list, tools/call (echo) and ping. Appends
// start/recv/send events to the config's record file, as the compiled fake
// does (the bench waits on them).
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const started = performance.now();
const config = JSON.parse(process.env.FAKE_MCP_CONFIG || '{}');
const name = config.name ?? 'node';
const tools = config.tools ?? ['t1'];
const prompts = config.prompts ?? [];
const recordPath = config.record;

function record(event, message) {
  if (!recordPath) return;
  const line = { t: Math.floor(performance.now() - started), pid: process.pid, event, message };
  appendFileSync(recordPath, JSON.stringify(line) + '\n');
}

function answer(id, result, error) {
  const msg = error === undefined ? { jsonrpc: '2.0', id, result } : { jsonrpc: '2.0', id, error };
  process.stdout.write(JSON.stringify(msg) + '\n');
  record('send', msg);
}

record('start', { name, mode: 'stdio', ppid: process.ppid });
for await (const line of createInterface({ input: process.stdin })) {
  let req;
  try {
    req = JSON.parse(line);
  } catch {
    continue;
  }
  record('recv', req);
  const { method, id } = req;
  if (id === undefined || id === null) continue;
  if (method === 'initialize') {
    answer(id, {
      protocolVersion: req.params?.protocolVersion ?? '2025-06-18',
      capabilities: { tools: { listChanged: true }, prompts: {} },
      serverInfo: { name, version: '1' },
    });
  } else if (method === 'tools/list') {
    answer(id, {
      tools: tools.map((t) => ({ name: t, description: 'echo', inputSchema: { type: 'object' } })),
    });
  } else if (method === 'prompts/list') {
    answer(id, { prompts: prompts.map((p) => ({ name: p })) });
  } else if (method === 'tools/call') {
    answer(id, { content: [{ type: 'text', text: JSON.stringify(req.params?.arguments ?? {}) }] });
  } else if (method === 'ping') {
    answer(id, {});
  } else {
    answer(id, undefined, { code: -32601, message: 'method not found' });
  }
}
