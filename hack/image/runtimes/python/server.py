"""Function runtime server of the local python312 image.

It follows the Kyma serverless runtime contract (port, routes, event,
context, responses) using the standard library only: Kyma's runtime runs on
Bottle, which cannot be installed where the local images are built (no
PyPI), so the request a handler gets (event['extensions']['request']) is
rebuilt here with Bottle's request API (query, forms, params, headers,
get_header, body, json, cookies, url, path, ...). Bottle's own module
(bottle.request, bottle.response, bottle.HTTPResponse) is not there.
"""
import base64
import collections.abc
import contextlib
import datetime
import email.parser
import email.policy
import http.cookies
import http.server
import importlib
import io
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


def env_number(names, default, kind, units=None):
    """The value of the first of names that is set, times its unit (1 unless
    units say otherwise). A value that is not a positive number is reported
    and replaced by the default: Kyma's image would not start, and a typo
    should not stop the Function."""
    name = next((n for n in names if os.environ.get(n)), None)
    if name is None:
        return default
    try:
        value = kind(os.environ[name])
        if value > 0:
            return kind(value * (units or {}).get(name, 1))
    except ValueError:
        pass
    print(f'{name}={os.environ[name]!r} is not a positive number: using {default}', file=sys.stderr)
    return default


MIB = 1024 * 1024
TIMEOUT = env_number(['FUNC_TIMEOUT'], 180, float)
# Kyma's python312 reads FUNC_MEMFILE_MAX in bytes; its docs name
# FUNC_BODY_MB_LIMIT, in MiB, instead (its python314 reads only that). The
# old name wins, as a Function setting both gets its limit on Kyma's image.
BODY_LIMIT = env_number(['FUNC_MEMFILE_MAX', 'FUNC_BODY_MB_LIMIT'], 100 * MIB, int, {'FUNC_BODY_MB_LIMIT': MIB})
# Handler calls served at the same time; more wait for a free slot (Kyma's
# python312 reads CHERRYPY_NUMTHREADS, its python314 SERVER_NUMTHREADS).
NUM_THREADS = env_number(['CHERRYPY_NUMTHREADS', 'SERVER_NUMTHREADS'], 50, int)
# A rejected request body is read and dropped until the client closes or
# sends nothing for this many seconds: closing a socket that still receives
# data resets the connection, and the client would lose the answer.
DRAIN_IDLE_SECONDS = 1
# Any value that is not empty turns the access log on, "false" too, as on
# Kyma's images.
ACCESS_LOG = bool(os.environ.get('KYMA_INTERNAL_LOGGER_ENABLED') or os.environ.get('SERVER_INTERNAL_LOGGER'))

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
CALL_SLOTS = threading.BoundedSemaphore(NUM_THREADS)


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


class FormsDict(collections.abc.MutableMapping):
    """Bottle's FormsDict: a multi-dict of strings as the WSGI server gives
    them (percent-decoded as latin-1). Item access and get() give a key's
    last value; getall() every value; attribute access (query.name) and
    getunicode() the value decoded as UTF-8, '' (None) when it is missing.
    """

    input_encoding = 'utf8'
    recode_unicode = True

    def __init__(self, pairs=()):
        self.dict = {}
        for key, value in pairs:
            self.append(key, value)

    def __len__(self):
        return len(self.dict)

    def __iter__(self):
        return iter(self.dict)

    def __contains__(self, key):
        return key in self.dict

    def __getitem__(self, key):
        return self.dict[key][-1]

    def __setitem__(self, key, value):
        self.append(key, value)

    def __delitem__(self, key):
        del self.dict[key]

    def keys(self):
        return self.dict.keys()

    def values(self):
        return (v[-1] for v in self.dict.values())

    def items(self):
        return ((k, v[-1]) for k, v in self.dict.items())

    def allitems(self):
        return ((k, v) for k, values in self.dict.items() for v in values)

    def get(self, key, default=None, index=-1, type=None):
        try:
            value = self.dict[key][index]
            return type(value) if type else value
        except Exception:
            return default

    getone = get

    def append(self, key, value):
        self.dict.setdefault(key, []).append(value)

    def replace(self, key, value):
        self.dict[key] = [value]

    def getall(self, key):
        return self.dict.get(key) or []

    getlist = getall

    def _recode(self, s, encoding=None):
        if isinstance(s, str) and self.recode_unicode:
            return s.encode('latin1').decode(encoding or self.input_encoding)
        if isinstance(s, bytes):
            return s.decode(encoding or self.input_encoding)
        return s

    def decode(self, encoding=None):
        """A copy with every key and value decoded as UTF-8."""
        copy = FormsDict()
        copy.input_encoding = encoding or self.input_encoding
        copy.recode_unicode = False
        for key, value in self.allitems():
            copy.append(self._recode(key, encoding), self._recode(value, encoding))
        return copy

    def getunicode(self, name, default=None, encoding=None):
        try:
            return self._recode(self[name], encoding)
        except (UnicodeError, KeyError):
            return default

    def __getattr__(self, name):
        if name.startswith('__') and name.endswith('__') or name == 'dict':
            raise AttributeError(name)
        return self.getunicode(name, default='')

    def __repr__(self):
        return f'FormsDict({list(self.allitems())!r})'


def parse_qsl(qs):
    """Bottle's query parsing: '+' is a space, values percent-decoded as latin-1."""
    pairs = []
    for pair in qs.split('&'):
        if not pair:
            continue
        key, _, value = pair.partition('=')
        pairs.append((urllib.parse.unquote(key.replace('+', ' '), 'latin1'),
                      urllib.parse.unquote(value.replace('+', ' '), 'latin1')))
    return pairs


def header_key(environ_key):
    """HTTP_X_TEST -> X-Test"""
    return environ_key.replace('_', '-').title()


class HeaderDict(collections.abc.Mapping):
    """Bottle's request headers, read from the WSGI environ: any case of a
    name finds it, names list as X-Test, values are decoded as UTF-8."""

    CGI_KEYS = ('CONTENT_TYPE', 'CONTENT_LENGTH')

    def __init__(self, environ):
        self.environ = environ

    def _key(self, name):
        key = name.replace('-', '_').upper()
        return key if key in self.CGI_KEYS else 'HTTP_' + key

    def raw(self, name, default=None):
        return self.environ.get(self._key(name), default)

    def __getitem__(self, name):
        return self.environ[self._key(name)].encode('latin1').decode('utf8', 'replace')

    def __contains__(self, name):
        return self._key(name) in self.environ

    def __iter__(self):
        for key in self.environ:
            if key.startswith('HTTP_'):
                yield header_key(key[5:])
            elif key in self.CGI_KEYS:
                yield header_key(key)

    def __len__(self):
        return sum(1 for _ in self)


class Request:
    """What a handler gets as event['extensions']['request']: the request
    surface of Kyma's Python runtime, a Bottle request, rebuilt on the
    standard library (Bottle cannot be installed here). Everything is read
    from a WSGI environ, as Bottle does, and the object pickles."""

    def __init__(self, environ, body):
        self.environ = environ
        self.environ['bottle.request.body'] = io.BytesIO(body)

    # the WSGI environ, as Bottle's request exposes it
    def __getitem__(self, key):
        return self.environ[key]

    def get(self, key, default=None):
        return self.environ.get(key, default)

    def keys(self):
        return self.environ.keys()

    def __iter__(self):
        return iter(self.environ)

    def __len__(self):
        return len(self.environ)

    def _cached(self, key, make):
        if key not in self.environ:
            self.environ[key] = make()
        return self.environ[key]

    @property
    def method(self):
        return self.environ.get('REQUEST_METHOD', 'GET').upper()

    @property
    def path(self):
        return '/' + self.environ.get('PATH_INFO', '').lstrip('/')

    @property
    def script_name(self):
        name = self.environ.get('SCRIPT_NAME', '').strip('/')
        return '/' + name + '/' if name else '/'

    @property
    def fullpath(self):
        return urllib.parse.urljoin(self.script_name, self.path.lstrip('/'))

    @property
    def query_string(self):
        return self.environ.get('QUERY_STRING', '')

    @property
    def urlparts(self):
        env = self.environ
        scheme = env.get('HTTP_X_FORWARDED_PROTO') or env.get('wsgi.url_scheme', 'http')
        host = env.get('HTTP_X_FORWARDED_HOST') or env.get('HTTP_HOST')
        if not host:
            host = env.get('SERVER_NAME', '127.0.0.1')
            port = env.get('SERVER_PORT')
            if port and port != ('80' if scheme == 'http' else '443'):
                host += ':' + port
        return urllib.parse.SplitResult(scheme, host, urllib.parse.quote(self.fullpath), self.query_string, '')

    @property
    def url(self):
        return self.urlparts.geturl()

    @property
    def headers(self):
        return HeaderDict(self.environ)

    def get_header(self, name, default=None):
        return self.headers.get(name, default)

    @property
    def content_type(self):
        return self.environ.get('CONTENT_TYPE', '').lower()

    @property
    def content_length(self):
        return int(self.environ.get('CONTENT_LENGTH') or -1)

    @property
    def chunked(self):
        return 'chunked' in self.environ.get('HTTP_TRANSFER_ENCODING', '').lower()

    @property
    def body(self):
        """The body as a file; every access starts it at the beginning."""
        body = self.environ['bottle.request.body']
        body.seek(0)
        return body

    @property
    def json(self):
        """The parsed body of an application/json request, else None."""
        if self.content_type.split(';')[0] not in ('application/json', 'application/json-rpc'):
            return None
        raw = self.body.read()
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise BadRequest('Invalid JSON') from e

    @property
    def query(self):
        return self._cached('bottle.request.query', lambda: FormsDict(parse_qsl(self.query_string)))

    GET = query

    def _post_part(self, files):
        # a multipart form's fields are decoded already: no recoding
        part = FormsDict((k, v) for k, v in self.POST.allitems() if isinstance(v, FileUpload) == files)
        part.recode_unicode = self.POST.recode_unicode
        return part

    @property
    def forms(self):
        """The fields of a form body (urlencoded or multipart), files apart."""
        return self._cached('bottle.request.forms', lambda: self._post_part(files=False))

    @property
    def files(self):
        return self._cached('bottle.request.files', lambda: self._post_part(files=True))

    @property
    def params(self):
        return self._cached('bottle.request.params', lambda: FormsDict(
            list(self.query.allitems()) + list(self.forms.allitems())))

    @property
    def POST(self):
        return self._cached('bottle.request.post', self._parse_post)

    def _parse_post(self):
        raw = self.body.read()
        media = self.content_type.split(';')[0].strip()
        if not media.startswith('multipart/'):
            return FormsDict(parse_qsl(raw.decode('latin1')))
        post = FormsDict()
        post.recode_unicode = False
        header = f'Content-Type: {self.environ.get("CONTENT_TYPE", "")}\r\n\r\n'.encode('latin1')
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(header + raw)
        for part in message.iter_parts() if message.is_multipart() else ():
            name = part.get_param('name', header='content-disposition')
            if name is None:
                continue
            data = part.get_payload(decode=True) or b''
            filename = part.get_filename()
            if filename is None:
                post.append(name, data.decode(part.get_content_charset() or 'utf8', 'replace'))
            else:
                post.append(name, FileUpload(data, name, filename, part.get_content_type()))
        return post

    @property
    def cookies(self):
        def parse():
            jar = http.cookies.SimpleCookie()
            with contextlib.suppress(http.cookies.CookieError):
                jar.load(self.environ.get('HTTP_COOKIE', ''))
            return FormsDict((c.key, c.value) for c in jar.values())
        return self._cached('bottle.request.cookies', parse)

    def get_cookie(self, key, default=None, secret=None):
        if secret is not None:
            raise NotImplementedError('signed cookies (get_cookie with a secret) are not supported by this runtime')
        return self.cookies.get(key) or default

    @property
    def is_xhr(self):
        return self.environ.get('HTTP_X_REQUESTED_WITH', '').lower() == 'xmlhttprequest'

    is_ajax = is_xhr

    @property
    def auth(self):
        """(user, password) of HTTP basic authentication, else None."""
        kind, _, data = self.environ.get('HTTP_AUTHORIZATION', '').partition(' ')
        if kind.lower() == 'basic':
            with contextlib.suppress(ValueError, UnicodeError):
                user, _, password = base64.b64decode(data.strip()).decode().partition(':')
                return user, password
        user = self.environ.get('REMOTE_USER')
        return (user, None) if user else None

    @property
    def remote_route(self):
        forwarded = self.environ.get('HTTP_X_FORWARDED_FOR')
        if forwarded:
            return [ip.strip() for ip in forwarded.split(',')]
        remote = self.environ.get('REMOTE_ADDR')
        return [remote] if remote else []

    @property
    def remote_addr(self):
        route = self.remote_route
        return route[0] if route else None

    def __repr__(self):
        return f'<Request: {self.method} {self.url}>'


class FileUpload:
    """An uploaded file of a multipart form, as Bottle describes one."""

    def __init__(self, data, name, filename, content_type):
        self.file = io.BytesIO(data)
        self.name = name
        self.raw_filename = filename
        self.filename = os.path.basename(filename.replace('\\', '/'))
        self.content_type = content_type
        self.content_length = len(data)


def wsgi_environ(handler, body_length):
    """The WSGI environ of the request http.server parsed, as a WSGI server
    would give Bottle: PATH_INFO percent-decoded as latin-1, headers as
    HTTP_* keys (repeated ones joined by commas)."""
    target = urllib.parse.urlsplit(handler.path)
    host, port = handler.server.server_address[:2]
    environ = {
        'REQUEST_METHOD': handler.command,
        'SCRIPT_NAME': '',
        'PATH_INFO': urllib.parse.unquote(target.path, 'latin1'),
        'QUERY_STRING': target.query,
        'SERVER_NAME': host,
        'SERVER_PORT': str(port),
        'SERVER_PROTOCOL': handler.request_version,
        'REMOTE_ADDR': handler.client_address[0],
        'REMOTE_PORT': str(handler.client_address[1]),
        'wsgi.url_scheme': 'http',
    }
    for name, value in handler.headers.items():
        key = name.replace('-', '_').upper()
        if key not in HeaderDict.CGI_KEYS:
            key = 'HTTP_' + key
        environ[key] = f'{environ[key]}, {value}' if key in environ else value
    environ.setdefault('CONTENT_TYPE', '')
    environ['CONTENT_LENGTH'] = str(body_length) if body_length or 'CONTENT_LENGTH' in environ else ''
    return environ


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
        raw = req.body.read()
        media = req.content_type.split(';')[0].strip()
        if media == 'application/cloudevents+json':
            try:
                attrs = json.loads(raw)
            except ValueError as e:
                raise BadRequest('Invalid JSON') from e
            if not isinstance(attrs, dict):
                raise ValueError('structured CloudEvent is not a JSON object')
            data = attrs.get('data')
            if 'data_base64' in attrs:
                data = base64.b64decode(attrs['data_base64'])
            self.set_cloud_event(attrs, data)
        elif 'ce-type' in req.headers and 'ce-source' in req.headers:
            attrs = {k[3:].lower(): req.headers[k] for k in req.headers if k.lower().startswith('ce-')}
            attrs.setdefault('datacontenttype', req.get_header('content-type'))
            self.set_cloud_event(attrs, parse_data(raw, req.content_type))
        elif req.content_type.strip() == 'application/json' and raw:
            try:
                self['data'] = json.loads(raw)
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
        self.body_size = len(body)  # for the access log
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
        # As a server with NUM_THREADS worker threads: further calls wait
        # for a free one. Health checks and metrics do not.
        with CALL_SLOTS:
            self.serve_call(body)

    def serve_call(self, body):
        req = Request(wsgi_environ(self, len(body)), body)
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
            except Exception as e:
                METRICS.inc(METRICS.failures, method)
                traceback.print_exc()
                outcome['error'] = e
            METRICS.observe(method, time.monotonic() - start)

        # The function runs in its own thread so a timeout can answer without it.
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(TIMEOUT)
        if worker.is_alive():
            METRICS.inc(METRICS.failures, method)
            return self.send(408, 'Timeout while processing the function')
        if isinstance(outcome.get('error'), BadRequest):
            # the handler read request.json of a body that is no JSON
            return self.send(400, str(outcome['error']))
        if outcome.get('error'):
            return self.send(500, 'Internal server error')
        try:
            content_type, payload = to_body(outcome.get('value'))
        except TypeError:
            traceback.print_exc()
            return self.send(500, 'Internal server error')
        self.send(200, payload, content_type or 'text/html; charset=UTF-8')

    def log_request(self, code='-', size='-'):
        """One line per answer in Apache's combined log format, on stdout,
        as Kyma's image writes it: address, user, time, request line,
        status, body length, referrer, user agent."""
        size = getattr(self, 'body_size', 0) or '-'
        self.body_size = 0
        if not ACCESS_LOG:
            return
        code = getattr(code, 'value', code)
        # A request line that did not parse leaves no headers.
        headers = getattr(self, 'headers', None) or {}
        user = basic_user(headers.get('Authorization', ''))
        referer, agent = headers.get('Referer', '-'), headers.get('User-Agent', '-')
        when = time.strftime('%d/%b/%Y:%H:%M:%S +0000', time.gmtime())
        print(f'{self.client_address[0]} - {user} [{when}] "{self.requestline}" {code} {size} '
              f'"{referer}" "{agent}"', flush=True)


def basic_user(authorization):
    """The user of HTTP basic authentication, '-' if none."""
    kind, _, data = authorization.partition(' ')
    if kind.lower() == 'basic':
        with contextlib.suppress(ValueError, UnicodeError):
            return base64.b64decode(data.strip()).decode().partition(':')[0] or '-'
    return '-'


class Server(http.server.ThreadingHTTPServer):
    # socketserver's backlog of 5 drops the connections of a burst (the
    # activator forwards every held request at once after a wake), and
    # their clients retry only a second or more later.
    request_queue_size = socket.SOMAXCONN


DRAIN_SECONDS = 2


def main():
    Handler.func = load_function()
    server = Server(('0.0.0.0', PORT), Handler)
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
