"""Function runtime server of the local python312 image.

It follows the Kyma serverless runtime contract (port, routes, event,
context, responses) using the standard library only, so the image builds
offline.
"""
import base64
import contextlib
import datetime
import http.server
import importlib
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import uuid

PORT = 8080
HANDLED_METHODS = ('GET', 'HEAD', 'POST', 'PATCH', 'DELETE')


def env_number(name, default, kind):
    try:
        value = kind(os.environ.get(name, default))
        return value if value > 0 else default
    except ValueError:
        return default


TIMEOUT = env_number('FUNC_TIMEOUT', 180, float)
BODY_LIMIT = env_number('FUNC_MEMFILE_MAX', 104857600, int)
# A rejected request body is read and dropped until the client closes or
# sends nothing for this many seconds: closing a socket that still receives
# data resets the connection, and the client would lose the answer.
DRAIN_IDLE_SECONDS = 1
ACCESS_LOG = bool(os.environ.get('KYMA_INTERNAL_LOGGER_ENABLED'))

CONTEXT = {
    'function-name': os.environ.get('FUNC_NAME'),
    'namespace': os.environ.get('SERVICE_NAMESPACE'),
    'runtime': os.environ.get('FUNC_RUNTIME'),
    'timeout': TIMEOUT,
    'body-size-limit': BODY_LIMIT,
    'memory-limit': os.environ.get('FUNC_MEMORY_LIMIT'),
}


def load_function():
    path = os.environ.get('FUNCTION_PATH', '/')
    mod_name = os.environ.get('MOD_NAME', 'handler')
    func_name = os.environ.get('FUNC_HANDLER', 'main')
    if mod_name == 'server':
        print('MOD_NAME must not be "server": that module is this runtime server', file=sys.stderr)
        sys.exit(2)
    sys.path.append(path)
    try:
        func = getattr(importlib.import_module(mod_name), func_name)
        if not callable(func):
            raise TypeError(f'{mod_name}.{func_name} is not callable')
    except Exception:
        print(f'user function not loaded from {path}:', file=sys.stderr)
        traceback.print_exc()
        return None
    print(f'loaded handler {mod_name}.{func_name} from {path}', file=sys.stderr)
    return func


class Metrics:
    """Prometheus counters and a duration histogram, labelled by method."""

    BUCKETS = (.005, .01, .025, .05, .075, .1, .25, .5, .75, 1, 2.5, 5, 7.5, 10)

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = {}
        self.failures = {}
        self.durations = {}

    def inc(self, counter, method):
        with self.lock:
            counter[method] = counter.get(method, 0) + 1

    def observe(self, method, seconds):
        with self.lock:
            h = self.durations.setdefault(method, {'buckets': [0] * len(self.BUCKETS), 'sum': 0.0, 'count': 0})
            for i, le in enumerate(self.BUCKETS):
                if seconds <= le:
                    h['buckets'][i] += 1
            h['sum'] += seconds
            h['count'] += 1

    def text(self):
        lines = []
        with self.lock:
            for name, help_text, counter in (
                    ('function_calls_total', 'Number of calls to user function', self.calls),
                    ('function_failures_total', 'Number of exceptions in user function', self.failures)):
                lines += [f'# HELP {name} {help_text}', f'# TYPE {name} counter']
                lines += [f'{name}{{method="{m}"}} {float(v)}' for m, v in counter.items()]
            name = 'function_duration_seconds'
            lines += [f'# HELP {name} Duration of user function in seconds', f'# TYPE {name} histogram']
            for m, h in self.durations.items():
                lines += [f'{name}_bucket{{le="{le}",method="{m}"}} {float(n)}' for le, n in zip(self.BUCKETS, h['buckets'])]
                lines += [f'{name}_bucket{{le="+Inf",method="{m}"}} {float(h["count"])}',
                          f'{name}_sum{{method="{m}"}} {h["sum"]}',
                          f'{name}_count{{method="{m}"}} {float(h["count"])}']
        return '\n'.join(lines) + '\n'


METRICS = Metrics()


class NoopSpan:
    """No exporter runs locally; spans only keep handler code working."""

    def set_attribute(self, *args, **kwargs):
        return self

    set_attributes = add_event = add_link = set_status = update_name = set_attribute

    def record_exception(self, *args, **kwargs):
        pass

    def end(self, *args, **kwargs):
        pass

    def is_recording(self):
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class NoopTracer:
    def start_span(self, *args, **kwargs):
        return NoopSpan()

    # A contextmanager also works as a decorator, as OTel's does.
    @contextlib.contextmanager
    def start_as_current_span(self, *args, **kwargs):
        yield NoopSpan()


TRACER = NoopTracer()


class Headers(dict):
    """Case-insensitive, picklable request headers."""

    def __init__(self, items=()):
        super().__init__()
        for key, value in items:
            key = key.lower()
            self[key] = f'{self[key]}, {value}' if key in self else value

    def __getitem__(self, key):
        return super().__getitem__(key.lower())

    def __contains__(self, key):
        return super().__contains__(str(key).lower())

    def get(self, key, default=None):
        return super().get(key.lower(), default)


class Request:
    """What a handler sees of the HTTP request; plain data, so it pickles."""

    def __init__(self, method, target, headers, body):
        url = urllib.parse.urlsplit(target)
        self.method = method
        self.url = target
        self.path = url.path
        self.query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        self.headers = headers
        self.body = body
        self.content_type = headers.get('content-type', '')

    def get_header(self, name, default=None):
        return self.headers.get(name, default)

    @property
    def json(self):
        if self.content_type.split(';')[0].strip().lower() != 'application/json' or not self.body:
            return None
        return json.loads(self.body)


class BadRequest(Exception):
    pass


def parse_data(body, content_type):
    """A binary CloudEvent's data, decoded by its content type."""
    media = content_type.split(';')[0].strip().lower()
    if not body:
        return None
    if media == 'application/json' or media.endswith('+json'):
        try:
            return json.loads(body)
        except ValueError as e:
            raise BadRequest('Invalid JSON') from e
    if media.startswith('text/'):
        return body.decode('utf-8', 'replace')
    return body


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def post_cloud_event(ce):
    address = os.environ.get('PUBLISHER_PROXY_ADDRESS')
    if not address:
        raise RuntimeError('PUBLISHER_PROXY_ADDRESS is not set')
    ce = {k: v for k, v in ce.items() if v is not None}
    if isinstance(ce.get('data'), bytes):
        ce['data_base64'] = base64.b64encode(ce.pop('data')).decode()
    req = urllib.request.Request(address, data=json.dumps(ce).encode(), method='POST',
                                 headers={'Content-Type': 'application/cloudevents+json'})
    try:
        urllib.request.urlopen(req, timeout=30).close()
    except urllib.error.HTTPError as e:
        # Like requests.post, a refused event is not an exception for the handler.
        print(f'publishing CloudEvent: {e.code} {e.reason}', file=sys.stderr)


class Event(dict):
    """The handler's first argument, read as event['data'], event['ce-type'], ..."""

    def __init__(self, req):
        super().__init__(extensions={'request': req})
        self.req = req
        self.tracer = TRACER
        media = req.content_type.split(';')[0].strip().lower()
        if media == 'application/cloudevents+json':
            try:
                attrs = json.loads(req.body)
            except ValueError as e:
                raise BadRequest('Invalid JSON') from e
            if not isinstance(attrs, dict):
                raise ValueError('structured CloudEvent is not a JSON object')
            data = attrs.get('data')
            if 'data_base64' in attrs:
                data = base64.b64decode(attrs['data_base64'])
            self.set_cloud_event(attrs, data)
        elif 'ce-type' in req.headers and 'ce-source' in req.headers:
            attrs = {k[3:]: v for k, v in req.headers.items() if k.startswith('ce-')}
            attrs.setdefault('datacontenttype', req.headers.get('content-type'))
            self.set_cloud_event(attrs, parse_data(req.body, req.content_type))
        elif req.content_type.strip().lower() == 'application/json' and req.body:
            try:
                self['data'] = json.loads(req.body)
            except ValueError as e:
                raise BadRequest('Invalid JSON') from e

    def set_cloud_event(self, attrs, data):
        self.update({
            'ce-type': attrs.get('type'),
            'ce-source': attrs.get('source'),
            'ce-id': attrs.get('id') or str(uuid.uuid4()),
            'ce-time': attrs.get('time'),
            'data': data,
        })
        for key in ('specversion', 'eventtypeversion', 'datacontenttype'):
            if attrs.get(key) is not None:
                self['ce-' + key] = attrs[key]

    def emitCloudEvent(self, type, source, data, optionalCloudEventAttributes=None):
        ce = {'specversion': '1.0', 'id': str(uuid.uuid4()), 'time': now()}
        ce.update(optionalCloudEventAttributes or {})
        ce.update(type=type, source=source, data=data)
        post_cloud_event(ce)

    # Deprecated upstream; kept so older handlers run.
    def publishCloudEvent(self, data):
        post_cloud_event(dict(data))

    def buildResponseCloudEvent(self, event_id, event_type, event_data):
        return {'specversion': '1.0', 'id': event_id, 'type': event_type, 'time': now(),
                'source': os.environ.get('FUNC_NAME') or 'function', 'data': event_data}


def to_body(value):
    """Converts a handler's return value by Bottle's rules: (content type, bytes)."""
    if value is None:
        return None, b''
    if isinstance(value, dict):
        return 'application/json', json.dumps(value).encode()
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        value = ''.join(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, bytes) for v in value):
        value = b''.join(value)
    if isinstance(value, str):
        return 'text/html; charset=UTF-8', value.encode()
    if isinstance(value, bytes):
        return 'text/html; charset=UTF-8', value
    raise TypeError(f'cannot send a {type(value).__name__} as the response body')


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    # Headers and body are separate writes; without this, Nagle and delayed ACKs add 40 ms.
    disable_nagle_algorithm = True
    func = None

    def send(self, status, body=b'', content_type='text/html; charset=UTF-8', headers=None):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        if body or status not in (204, 304):
            self.send_header('Content-Type', content_type)
            self.send_header('Content-Length', str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header('Connection', 'close')
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(body)

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == '/healthz':
            self.send(200, 'OK')
        elif path == '/metrics':
            self.send(200, METRICS.text(), 'text/plain; version=0.0.4; charset=utf-8')
        elif path == '/favicon.ico':
            self.send(204)
        else:
            self.call_function()

    do_HEAD = do_GET

    def do_POST(self):
        self.call_function()

    do_PATCH = do_DELETE = do_POST

    def __getattr__(self, name):
        # Any other method, PUT and OPTIONS included, is not routed.
        if name.startswith('do_'):
            return self.not_allowed
        raise AttributeError(name)

    def not_allowed(self):
        self.close_connection = True
        self.send(405, 'Method Not Allowed', headers={'Allow': ', '.join(HANDLED_METHODS)})

    def read_body(self):
        if 'chunked' in self.headers.get('Transfer-Encoding', '').lower():
            chunks, size = [], 0
            while True:
                n = int(self.rfile.readline().split(b';')[0].strip() or b'0', 16)
                if n == 0:
                    while self.rfile.readline().strip():
                        pass  # trailers
                    return b''.join(chunks)
                size += n
                if size > BODY_LIMIT:
                    return None
                chunks.append(self.rfile.read(n))
                self.rfile.readline()
        length = int(self.headers.get('Content-Length') or 0)
        if length > BODY_LIMIT:
            return None
        return self.rfile.read(length) if length > 0 else b''

    def reject(self, status, message):
        """Answers a request whose body was not read, then closes the connection."""
        self.close_connection = True
        self.send(status, message)
        try:
            self.connection.shutdown(socket.SHUT_WR)  # the answer is complete
            self.connection.settimeout(DRAIN_IDLE_SECONDS)
            while self.rfile.read1(65536):
                pass
        except OSError:
            pass

    def call_function(self):
        try:
            body = self.read_body()
        except ValueError:
            return self.reject(400, 'Bad Request')
        if body is None:
            return self.reject(413, 'Payload Too Large')
        if Handler.func is None:
            return self.send(500, 'User function not loaded')
        req = Request(self.command, self.path, Headers(self.headers.items()), body)
        try:
            event = Event(req)
        except BadRequest as e:
            return self.send(400, str(e))
        except Exception:
            traceback.print_exc()
            return self.send(500, 'Internal server error')

        method = self.command
        METRICS.inc(METRICS.calls, method)
        outcome = {}

        def run():
            start = time.monotonic()
            try:
                outcome['value'] = Handler.func(event, CONTEXT)
            except Exception:
                METRICS.inc(METRICS.failures, method)
                traceback.print_exc()
                outcome['error'] = True
            METRICS.observe(method, time.monotonic() - start)

        # The function runs in its own thread so a timeout can answer without it.
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(TIMEOUT)
        if worker.is_alive():
            METRICS.inc(METRICS.failures, method)
            return self.send(408, 'Timeout while processing the function')
        if outcome.get('error'):
            return self.send(500, 'Internal server error')
        try:
            content_type, payload = to_body(outcome.get('value'))
        except TypeError:
            traceback.print_exc()
            return self.send(500, 'Internal server error')
        self.send(200, payload, content_type or 'text/html; charset=UTF-8')

    def log_request(self, code='-', size='-'):
        if ACCESS_LOG:
            print(f'{self.address_string()} - - [{self.log_date_time_string()}] '
                  f'"{self.requestline}" {code} {size}', flush=True)


DRAIN_SECONDS = 2


def main():
    Handler.func = load_function()
    server = http.server.ThreadingHTTPServer(('0.0.0.0', PORT), Handler)
    server.daemon_threads = True

    def stop(signum, frame):
        print(f'{signal.Signals(signum).name} received, shutting down in {DRAIN_SECONDS} s', file=sys.stderr)

        # A terminating Pod leaves its Service's endpoints only after the
        # signal (kube-proxy reprograms asynchronously): keep serving that
        # long first. shutdown() waits for serve_forever, which runs in the
        # main thread.
        def drain_then_stop():
            time.sleep(DRAIN_SECONDS)
            server.shutdown()
        threading.Thread(target=drain_then_stop, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f'listening on port {PORT}', file=sys.stderr)
    server.serve_forever()
    server.server_close()
    sys.stdout.flush()
    sys.stderr.flush()
    # Daemon threads (the drain timer, a handler past its timeout) may still
    # run: the interpreter's finalization is not safe with them (a general
    # protection fault in libc was seen at Pod ends), so leave without it.
    os._exit(0)


if __name__ == '__main__':
    main()
