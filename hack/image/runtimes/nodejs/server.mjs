// Function runtime server of the local nodejs20/22/24 images. It follows the
// runtime contract in docs/contributor/runtime-contract.md (port, routes,
// event, context, responses)
// and serves the handler through Express, as Kyma's runtimes do: handlers
// get Express's request and response (query, params, get(), status(),
// json(), ...). Express is the image's only dependency (package-lock.json),
// installed in /usr/src/app/node_modules when the image is built.
import http from 'node:http';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';
import express from 'express';

const PORT = 8080;
const env = process.env;

// The first of names that is set; a value that is not a positive number
// is reported and replaced by the default, so a typo cannot stop the server.
function positiveSetting(names, fallback) {
  const name = names.find((n) => env[n] !== undefined && env[n] !== '');
  if (name === undefined) return fallback;
  const value = Number(env[name]);
  if (value > 0) return value;
  console.error(`${name}=${JSON.stringify(env[name])} is not a positive number: using ${fallback}`);
  return fallback;
}

const timeoutSec = positiveSetting(['FUNC_TIMEOUT'], 180);
// Kyma's nodejs20/22/24 read REQ_MB_LIMIT; its docs name FUNC_BODY_MB_LIMIT
// instead (its nodejs26 reads only that). The old name wins, as a Function
// setting both gets the old one's limit on Kyma's images.
const mbLimit = positiveSetting(['REQ_MB_LIMIT', 'FUNC_BODY_MB_LIMIT'], 1);
// Any value that is not empty turns the access log on, "false" too, as on
// Kyma's images.
const accessLog = Boolean(env.KYMA_INTERNAL_LOGGER_ENABLED || env.SERVER_INTERNAL_LOGGER);

const context = {
  'function-name': env.FUNC_NAME,
  namespace: env.SERVICE_NAMESPACE,
  runtime: env.FUNC_RUNTIME,
  timeout: timeoutSec,
  'body-size-limit': mbLimit,
};

// The handler path is relative to this file, not to the working directory.
const here = path.dirname(fileURLToPath(import.meta.url));
const handlerFile = path.resolve(here, env.HANDLER_PATH || './handler.js');
const userMain = await loadMain(handlerFile);

async function loadMain(file) {
  try {
    const mod = await import(pathToFileURL(file).href);
    // ESM named export, CommonJS module.exports.main, or an ESM default object.
    const main = typeof mod.main === 'function' ? mod.main : mod.default?.main;
    if (typeof main !== 'function') throw new Error(`${file} does not export a function "main"`);
    console.error(`loaded handler main from ${file}`);
    return main;
  } catch (err) {
    console.error(`user function not loaded: ${err?.stack || err}`);
    return undefined;
  }
}

// Minimal Prometheus metrics; the label is the HTTP method.
const calls = new Map();
const failures = new Map();
const durationBuckets = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000];
const durations = new Map();

function inc(counter, method) {
  counter.set(method, (counter.get(method) || 0) + 1);
}

function observe(method, ms) {
  let h = durations.get(method);
  if (!h) durations.set(method, (h = { buckets: durationBuckets.map(() => 0), sum: 0, count: 0 }));
  durationBuckets.forEach((le, i) => { if (ms <= le) h.buckets[i]++; });
  h.sum += ms;
  h.count++;
}

function metricsText() {
  const lines = [];
  const counter = (name, help, m) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
    for (const [method, v] of m) lines.push(`${name}{method="${method}"} ${v}`);
  };
  counter('function_calls_total', 'Number of calls to user function', calls);
  counter('function_failures_total', 'Number of exceptions in user function', failures);
  const name = 'function_duration_miliseconds';
  lines.push(`# HELP ${name} Duration of user function in milliseconds`, `# TYPE ${name} histogram`);
  for (const [method, h] of durations) {
    durationBuckets.forEach((le, i) => lines.push(`${name}_bucket{le="${le}",method="${method}"} ${h.buckets[i]}`));
    lines.push(`${name}_bucket{le="+Inf",method="${method}"} ${h.count}`);
    lines.push(`${name}_sum{method="${method}"} ${h.sum}`, `${name}_count{method="${method}"} ${h.count}`);
  }
  return lines.join('\n') + '\n';
}

// No exporter is configured locally, so spans are no-ops that keep handler code working.
const noopSpan = {
  spanContext: () => ({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 0 }),
  setAttribute() { return this; },
  setAttributes() { return this; },
  addEvent() { return this; },
  addLink() { return this; },
  setStatus() { return this; },
  updateName() { return this; },
  recordException() {},
  isRecording: () => false,
  end() {},
};
const tracer = {
  startSpan: () => noopSpan,
  startActiveSpan: (...args) => args[args.length - 1](noopSpan),
};

// Content type without parameters, lower case.
function mediaType(value) {
  return String(value || '').split(';')[0].trim().toLowerCase();
}

function httpError(status, message) {
  return Object.assign(new Error(message), { status });
}

const ceAttributes = ['type', 'source', 'specversion', 'id', 'time', 'eventtypeversion', 'datacontenttype'];

// Returns the CloudEvent attributes and data of a request, or undefined if it is none.
function cloudEvent(req, type, body) {
  let attrs;
  let data;
  if (type === 'application/cloudevents+json') {
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw httpError(500, 'Internal server error');
    attrs = body;
    data = body.data_base64 !== undefined ? Buffer.from(body.data_base64, 'base64') : body.data;
  } else if (req.headers['ce-type'] && req.headers['ce-source']) {
    attrs = {};
    for (const a of ceAttributes) attrs[a] = req.headers[`ce-${a}`];
    attrs.datacontenttype ??= req.headers['content-type'];
    data = body;
  } else return undefined;
  const ce = { data };
  for (const a of ceAttributes) ce[`ce-${a}`] = attrs[a];
  // Like the SDK, fill what the sender may omit.
  ce['ce-specversion'] ??= '1.0';
  ce['ce-id'] ??= randomUUID();
  ce['ce-time'] ??= new Date().toISOString();
  return ce;
}

async function postCloudEvent(ce) {
  if (!env.PUBLISHER_PROXY_ADDRESS) throw new Error('PUBLISHER_PROXY_ADDRESS is not set');
  const payload = { ...ce };
  if (Buffer.isBuffer(payload.data)) {
    payload.data_base64 = payload.data.toString('base64');
    delete payload.data;
  }
  const resp = await fetch(env.PUBLISHER_PROXY_ADDRESS, {
    method: 'POST',
    headers: { 'Content-Type': 'application/cloudevents+json' },
    body: JSON.stringify(payload),
  });
  const text = await resp.text();
  let data = text;
  try { data = JSON.parse(text); } catch { /* keep text */ }
  // The shape of an axios response, which handlers written for Kyma read.
  return { status: resp.status, statusText: resp.statusText, headers: Object.fromEntries(resp.headers), data };
}

function newCloudEvent(type, source, data, attrs = {}) {
  let datacontenttype;
  if (typeof data === 'string') datacontenttype = 'text/plain';
  else if (data !== undefined && !Buffer.isBuffer(data)) datacontenttype = 'application/json';
  return {
    specversion: '1.0', id: randomUUID(), time: new Date().toISOString(), datacontenttype,
    ...attrs, type, source, data,
  };
}

function buildEvent(req, res, body, type) {
  let event = cloudEvent(req, type, body);
  if (!event) {
    event = {};
    if (body && !type.startsWith('multipart/')) event.data = body;
  }
  Object.assign(event, {
    extensions: { request: req, response: res },
    tracer,
    setResponseHeader: (key, value) => res.setHeader(key, value),
    setResponseContentType: (value) => res.setHeader('Content-Type', value),
    setResponseStatus: (status) => { res.statusCode = status; },
    emitCloudEvent: (ceType, source, data, attrs) => postCloudEvent(newCloudEvent(ceType, source, data, attrs)),
    // Deprecated upstream; kept so older handlers run.
    publishCloudEvent: (ce) => postCloudEvent(ce),
    buildResponseCloudEvent: (id, ceType, data) => newCloudEvent(ceType, env.FUNC_NAME || 'function', data, { id }),
  });
  return event;
}

function setDefaultType(res, value) {
  if (!res.hasHeader('Content-Type')) res.setHeader('Content-Type', value);
}

// Ends the response with body, its length in a header as Express's send()
// puts it (the access log reads it there); Node would send the same. A
// status without a body, or a handler's own framing, gets none.
function endWith(res, body) {
  const framed = res.hasHeader('Content-Length') || res.hasHeader('Transfer-Encoding');
  if (!framed && res.statusCode !== 204 && res.statusCode !== 304) {
    res.setHeader('Content-Length', Buffer.byteLength(body));
  }
  res.end(body);
}

function sendText(res, status, text) {
  if (res.writableEnded || res.destroyed) return;
  if (res.headersSent) return void res.end();
  res.statusCode = status;
  setDefaultType(res, 'text/plain; charset=utf-8');
  endWith(res, text);
}

// Turns a handler's value (returned, resolved or passed to the callback) into the response.
function sendValue(res, body, status, headers) {
  if (res.writableEnded || res.destroyed) return;
  if (res.headersSent) return void res.end();
  try {
    for (const [key, value] of Object.entries(headers || {})) res.setHeader(key, value);
    if (status) res.statusCode = status;
    if (body && typeof body === 'object') {
      const json = JSON.stringify(body);
      setDefaultType(res, 'application/json; charset=utf-8');
      endWith(res, json);
    } else if (body && typeof body === 'string') {
      endWith(res, body);
    } else if (body) {
      throw new TypeError(`cannot send a ${typeof body} as the response body`);
    } else if (status) {
      sendText(res, res.statusCode, http.STATUS_CODES[res.statusCode] || String(res.statusCode));
    } else {
      res.end();
    }
  } catch (err) {
    console.error(err);
    sendText(res, 500, 'Internal server error');
  }
}

function callHandler(req, res) {
  res.setHeader('Access-Control-Allow-Origin', '*');
  if (!userMain) return sendText(res, 500, 'User function not loaded');

  let event;
  try {
    event = buildEvent(req, res, req.body, mediaType(req.headers['content-type']));
  } catch (err) {
    if (!err.status) console.error(err);
    return sendText(res, err.status || 500, err.status ? err.message : 'Internal server error');
  }

  res.locals.handlerCalled = true;
  inc(calls, req.method);
  const start = performance.now();
  const fail = (err) => {
    inc(failures, req.method);
    console.error(err);
    sendText(res, 500, typeof err === 'string' ? err : 'Internal server error');
  };
  const done = () => observe(req.method, performance.now() - start);
  const callback = (body, status, headers) => sendValue(res, body, status, headers);
  try {
    const result = userMain(event, context, callback);
    if (result && typeof result.then === 'function') {
      result.then((value) => { done(); sendValue(res, value); }, (err) => { done(); fail(err); });
    } else {
      done();
      sendValue(res, result);
    }
  } catch (err) {
    done();
    fail(err);
  }
}

function preflight(req, res) {
  res.setHeader('Access-Control-Allow-Origin', '*');
  res.setHeader('Access-Control-Allow-Methods', req.headers['access-control-request-method'] || 'GET,HEAD,PUT,PATCH,POST,DELETE');
  const headers = req.headers['access-control-request-headers'];
  if (headers) res.setHeader('Access-Control-Allow-Headers', headers);
  res.setHeader('Vary', 'Access-Control-Request-Headers');
  res.setHeader('Content-Length', '0');
  res.statusCode = 200;
  res.end();
}

const app = express();

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

// Apache's time format, in UTC: 10/Oct/2000:13:55:36 +0000.
function clfDate(d) {
  const two = (n) => String(n).padStart(2, '0');
  return `${two(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:` +
    `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())} +0000`;
}

// The user of HTTP basic authentication, as the log names it.
function basicUser(req) {
  const [scheme, data] = String(req.headers.authorization || '').split(' ');
  if (scheme?.toLowerCase() !== 'basic' || !data) return '-';
  return Buffer.from(data, 'base64').toString().split(':')[0] || '-';
}

// One line per answered request in Apache's combined log format, on
// stdout, as Kyma's images write it: address, user, time, request line,
// status, body length, referrer, user agent.
function accessLine(req, res) {
  const header = (name) => req.headers[name] || '-';
  const length = res.getHeader('Content-Length') ?? '-';
  return `${req.socket.remoteAddress ?? '-'} - ${basicUser(req)} [${clfDate(new Date())}] ` +
    `"${req.method} ${req.originalUrl} HTTP/${req.httpVersion}" ${res.statusCode} ${length} ` +
    `"${header('referer')}" "${header('user-agent')}"`;
}

if (accessLog) {
  app.use((req, res, next) => {
    res.on('finish', () => console.log(accessLine(req, res)));
    next();
  });
}

// The timeout counts from the request's arrival, its body's upload included.
app.use((req, res, next) => {
  const timer = setTimeout(() => {
    if (res.locals.handlerCalled) inc(failures, req.method);
    sendText(res, 408, 'Request Timeout');
  }, timeoutSec * 1000);
  res.on('close', () => clearTimeout(timer));
  next();
});

// The body parsers and their options are Kyma's: JSON (also of structured
// CloudEvents, any JSON value), text, forms (nested, qs), any other type a
// Buffer. A body over the limit is read off and answered 413, so the
// connection stays usable and the client gets the answer.
const limit = `${mbLimit}mb`;
app.use(express.json({ type: ['application/json', 'application/cloudevents+json'], limit, strict: false }));
app.use(express.text({ type: ['text/*'], limit }));
app.use(express.urlencoded({ limit, extended: true }));
app.use(express.raw({ type: () => true, limit }));

app.get('/healthz', (req, res) => sendText(res, 200, 'OK'));
app.get('/metrics', (req, res) => {
  res.setHeader('Content-Type', 'text/plain; version=0.0.4; charset=utf-8');
  res.end(metricsText());
});
app.get('/favicon.ico', (req, res) => {
  res.statusCode = 204;
  res.end();
});

// Kyma mounts the handler on Express 5's named wildcard "*path": every
// method and path, req.params.path the path's segments ("/a/b" gives
// ["", "a", "b"]).
app.all('*path', (req, res) => (req.method === 'OPTIONS' ? preflight(req, res) : callHandler(req, res)));

// Errors of the body parsers (400 bad JSON, 413 too large, 415 unknown
// charset) and anything else that reaches Express.
// eslint-disable-next-line no-unused-vars
app.use((err, req, res, next) => {
  const status = Number(err.status || err.statusCode);
  if (status >= 400 && status < 500) return sendText(res, status, http.STATUS_CODES[status] || String(status));
  console.error(err);
  sendText(res, 500, 'Internal server error');
});

const server = http.createServer(app);

// Errors from the handler's own async work must not stop the server.
process.on('uncaughtException', (err) => console.error('uncaught exception:', err));
process.on('unhandledRejection', (err) => console.error('unhandled rejection:', err));

// A terminating Pod leaves its Service's endpoints only after the signal
// (kube-proxy reprograms asynchronously): keep serving that long first.
const DRAIN_MS = 2000;

function shutdown(signal) {
  console.error(`${signal} received, shutting down in ${DRAIN_MS} ms`);
  setTimeout(() => {
    server.close(() => process.exit(0));
    server.closeIdleConnections();
    // In-flight requests get a moment; keep-alive or slow ones must not delay the exit.
    setTimeout(() => process.exit(0), 1000).unref();
  }, DRAIN_MS).unref();
}
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);

// Without this, the uncaughtException handler would keep a server alive that never listened.
server.on('error', (err) => {
  console.error(`server error: ${err.stack || err}`);
  process.exit(1);
});
server.listen(PORT, () => console.error(`listening on port ${PORT}`));
