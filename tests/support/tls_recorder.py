"""A loopback HTTPS server that records how a client introduces itself, for tests/test_fingerprint.py and
bin/fingerprint: per connection the raw TLS ClientHello (cipher list, extensions in the order sent, supported
groups, signature algorithms, ALPN) with its JA4 and JA3, and, once the handshake is done (ALPN h2 or
http/1.1 offered), the HTTP/2 connection preface (SETTINGS in order, the connection WINDOW_UPDATE, PRIORITY
frames) and the order of the first request's pseudo-headers and headers. Every request gets a small 200 page,
so a browser and an HTTP client both finish normally.

The ClientHello is read off the socket before TLS sees it; the same bytes are then fed to an ssl.SSLObject
through a MemoryBIO, so the handshake completes as if nothing had looked. The certificate is made at start
(a CA and a leaf for HOST and 127.0.0.1, with `cryptography`): an HTTP client trusts the CA file, Chromium
the leaf's SPKI hash (--ignore-certificate-errors-spki-list).

JA4 follows FoxIO's spec (github.com/FoxIO-LLC/ja4, technical_details/JA4.md); JA3 is Salesforce's; JA3N is
JA3 with the extensions sorted, since Chrome permutes its extension order on every connection."""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import socket
import ssl
import struct
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import hpack
import msgspec
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

HOST = "fingerprint.test"  # a name, not an address, so both clients send SNI as they do to a real site
PAGE = b"<!doctype html><html><head><title>Recorded</title></head><body><p>Your hello was recorded.</p></body></html>"
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
IO_TIMEOUT_S = 30.0

# TLS extension numbers (IANA) read here
EXT_SNI, EXT_GROUPS, EXT_POINT_FORMATS, EXT_SIG_ALGS, EXT_ALPN = 0x0000, 0x000A, 0x000B, 0x000D, 0x0010
EXT_SUPPORTED_VERSIONS, EXT_KEY_SHARE, EXT_CERT_COMPRESSION = 0x002B, 0x0033, 0x001B
EXT_ALPS = (0x4469, 0x44CD)  # application settings: the codepoint Chrome used first, and the one it moved to
EXTENSION_NAMES = {
    0x0000: "server_name", 0x0005: "status_request", 0x000A: "supported_groups", 0x000B: "ec_point_formats",
    0x000D: "signature_algorithms", 0x0010: "alpn", 0x0012: "signed_certificate_timestamp", 0x0015: "padding",
    0x0017: "extended_master_secret", 0x001B: "compress_certificate", 0x0023: "session_ticket",
    0x0029: "pre_shared_key", 0x002B: "supported_versions", 0x002D: "psk_key_exchange_modes",
    0x0033: "key_share", 0x4469: "alps(old)", 0x44CD: "alps", 0xFE0D: "encrypted_client_hello",
    0xFF01: "renegotiation_info",
}
_JA4_VERSIONS = {0x0304: "13", 0x0303: "12", 0x0302: "11", 0x0301: "10", 0x0300: "s3", 0x0002: "s2",
                 0xFEFF: "d1", 0xFEFD: "d2", 0xFEFC: "d3"}
# HTTP/2 frame types and flags (RFC 9113)
DATA, HEADERS, PRIORITY, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0x0, 0x1, 0x2, 0x4, 0x6, 0x7, 0x8, 0x9
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
FRAME_NAMES = {0x0: "DATA", 0x1: "HEADERS", 0x2: "PRIORITY", 0x3: "RST_STREAM", 0x4: "SETTINGS", 0x5: "PUSH_PROMISE",
               0x6: "PING", 0x7: "GOAWAY", 0x8: "WINDOW_UPDATE", 0x9: "CONTINUATION"}
T = TypeVar("T")
_PSEUDO_LETTERS = {":method": "m", ":authority": "a", ":scheme": "s", ":path": "p", ":protocol": "r"}


def is_grease(value: int) -> bool:
    """RFC 8701's reserved values (0x0a0a, 0x1a1a … 0xfafa), which Chrome scatters to keep servers honest."""
    return (value & 0x0F0F) == 0x0A0A and (value >> 8) == (value & 0xFF)


def _hash12(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _hex4(values: list[int]) -> list[str]:
    return [f"{v:04x}" for v in values]


class ClientHello(msgspec.Struct, frozen=True):
    """What a ClientHello says, every list in the order sent and GREASE kept (the fingerprints drop it)."""
    legacy_version: int
    ciphers: list[int]
    extensions: list[int]
    groups: list[int] = []
    point_formats: list[int] = []
    sig_algs: list[int] = []
    alpn: list[str] = []
    sni: str | None = None
    supported_versions: list[int] = []
    key_shares: list[int] = []
    alps: list[str] = []
    cert_compression: list[int] = []
    session_id_length: int = 0

    @property
    def tls_version(self) -> int:
        versions = [v for v in self.supported_versions if not is_grease(v)]
        return max(versions) if versions else self.legacy_version

    def clean(self, values: list[int]) -> list[int]:
        return [v for v in values if not is_grease(v)]

    def _ja4_a(self) -> str:
        alpn = self.alpn[0] if self.alpn else ""
        if not alpn:
            alpn_chars = "00"
        elif alpn[0].isascii() and alpn[0].isalnum() and alpn[-1].isascii() and alpn[-1].isalnum():
            alpn_chars = alpn[0] + alpn[-1]
        else:  # the spec: the first and last hex digits of the value's bytes
            raw = alpn.encode("latin-1")
            alpn_chars = f"{raw[0]:02x}"[0] + f"{raw[-1]:02x}"[1]
        sni = "d" if EXT_SNI in self.extensions else "i"
        ciphers, extensions = len(self.clean(self.ciphers)), len(self.clean(self.extensions))
        return (f"t{_JA4_VERSIONS.get(self.tls_version, '00')}{sni}"
                f"{min(ciphers, 99):02d}{min(extensions, 99):02d}{alpn_chars}")

    def ja4_r(self) -> str:
        """JA4 before hashing: sorted ciphers, sorted extensions (less SNI and ALPN), signature algorithms as sent."""
        ciphers = ",".join(sorted(_hex4(self.clean(self.ciphers))))
        extensions = ",".join(sorted(_hex4([e for e in self.clean(self.extensions) if e not in (EXT_SNI, EXT_ALPN)])))
        sig_algs = ",".join(_hex4(self.clean(self.sig_algs)))
        return f"{self._ja4_a()}_{ciphers}_{extensions}" + (f"_{sig_algs}" if sig_algs else "")

    def ja4(self) -> str:
        a, ciphers, rest = self.ja4_r().split("_", 2)
        return f"{a}_{_hash12(ciphers) if ciphers else '0' * 12}_{_hash12(rest) if rest else '0' * 12}"

    def ja3_text(self, *, sort_extensions: bool = False) -> str:
        extensions = self.clean(self.extensions)
        fields = [self.clean(self.ciphers), sorted(extensions) if sort_extensions else extensions,
                  self.clean(self.groups), self.point_formats]
        return ",".join([str(self.legacy_version), *("-".join(map(str, f)) for f in fields)])

    def ja3(self) -> str:
        return hashlib.md5(self.ja3_text().encode()).hexdigest()

    def ja3n(self) -> str:
        return hashlib.md5(self.ja3_text(sort_extensions=True).encode()).hexdigest()


class H2Preface(msgspec.Struct):
    """The client's first HTTP/2 frames up to and including its first request's headers."""
    settings: list[tuple[int, int]] = []  # (identifier, value) in the order sent
    window_update: int | None = None  # the connection-level increment (stream 0), if any came first
    priority_frames: list[tuple[int, int, bool, int]] = []  # (stream, depends on, exclusive, weight)
    headers_priority: tuple[int, bool, int] | None = None  # the first HEADERS frame's (depends on, exclusive, weight)
    frames: list[str] = []  # frame types in order, up to the first HEADERS
    pseudo_headers: list[str] = []
    headers: list[tuple[str, str]] = []  # the regular headers, in order

    def akamai(self) -> str:
        """Akamai's HTTP/2 fingerprint: SETTINGS|WINDOW_UPDATE|PRIORITY frames|pseudo-header order."""
        settings = ";".join(f"{k}:{v}" for k, v in self.settings)
        priorities = ",".join(f"{s}:{int(e)}:{d}:{w}" for s, d, e, w in self.priority_frames) or "0"
        pseudo = ",".join(_PSEUDO_LETTERS.get(p, p) for p in self.pseudo_headers)
        return f"{settings}|{self.window_update or '00'}|{priorities}|{pseudo}"


class Connection(msgspec.Struct):
    hello: ClientHello
    alpn: str | None = None  # what the handshake agreed
    h2: H2Preface | None = None
    http1_headers: list[tuple[str, str]] = []  # the headers in order, when the client spoke HTTP/1.1
    path: str | None = None  # the first request's path, once it came
    error: str | None = None


# --- the ClientHello -------------------------------------------------------------------------------------

class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise ValueError("truncated ClientHello")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return int(struct.unpack("!H", self.take(2))[0])

    def vector(self, length_bytes: int) -> _Cursor:
        n = self.u8() if length_bytes == 1 else self.u16()
        return _Cursor(self.take(n))

    def done(self) -> bool:
        return self.at >= len(self.data)

    def u16s(self) -> list[int]:
        out = []
        while not self.done():
            out.append(self.u16())
        return out

    def names(self) -> list[str]:
        """A list of one-byte-length strings (ALPN, ALPS)."""
        out = []
        while not self.done():
            out.append(self.vector(1).data.decode("latin-1"))
        return out


def parse_client_hello(body: bytes) -> ClientHello:
    """The ClientHello handshake message's body (after its 4-byte header)."""
    c = _Cursor(body)
    legacy_version = c.u16()
    c.take(32)  # random
    session_id_length = len(c.vector(1).data)
    ciphers = c.vector(2).u16s()
    c.vector(1)  # compression methods
    fields: dict[str, object] = {}
    extensions = []
    exts = c.vector(2) if not c.done() else _Cursor(b"")
    while not exts.done():
        kind, data = exts.u16(), exts.vector(2)
        extensions.append(kind)
        fields.update(_extension_fields(kind, data))
    return msgspec.convert({"legacy_version": legacy_version, "ciphers": ciphers, "extensions": extensions,
                            "session_id_length": session_id_length, **fields}, ClientHello)


def _extension_fields(kind: int, data: _Cursor) -> dict[str, object]:
    if kind == EXT_SNI:
        names = data.vector(2)
        names.u8()  # name type: host_name
        return {"sni": names.vector(2).data.decode("ascii", "replace")}
    if kind == EXT_GROUPS:
        return {"groups": data.vector(2).u16s()}
    if kind == EXT_POINT_FORMATS:
        return {"point_formats": list(data.vector(1).data)}
    if kind == EXT_SIG_ALGS:
        return {"sig_algs": data.vector(2).u16s()}
    if kind == EXT_ALPN:
        return {"alpn": data.vector(2).names()}
    if kind == EXT_SUPPORTED_VERSIONS:
        return {"supported_versions": data.vector(1).u16s()}
    if kind == EXT_KEY_SHARE:
        shares, groups = data.vector(2), []
        while not shares.done():
            groups.append(shares.u16())
            shares.vector(2)
        return {"key_shares": groups}
    if kind == EXT_CERT_COMPRESSION:
        return {"cert_compression": data.vector(1).u16s()}
    if kind in EXT_ALPS:
        return {"alps": data.vector(2).names()}
    return {}


def read_client_hello(sock: socket.socket) -> tuple[bytes, bytes]:
    """Read TLS records until the first handshake message (the ClientHello) is whole: (its body, every byte
    read), the latter to be handed on to TLS. The message may span records."""
    raw, handshake = bytearray(), bytearray()
    while len(handshake) < 4 or len(handshake) < 4 + int.from_bytes(handshake[1:4], "big"):
        header = _recv_exactly(sock, 5)
        length = int.from_bytes(header[3:5], "big")
        if header[0] != 22:
            raise ValueError(f"expected a TLS handshake record, got content type {header[0]}")
        payload = _recv_exactly(sock, length)
        raw += header + payload
        handshake += payload
    if handshake[0] != 1:
        raise ValueError(f"expected a ClientHello, got handshake type {handshake[0]}")
    return bytes(handshake[4:4 + int.from_bytes(handshake[1:4], "big")]), bytes(raw)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the client closed the connection")
        out += chunk
    return bytes(out)


# --- TLS over the bytes already read ---------------------------------------------------------------------

class _TLS:
    """An SSLObject over MemoryBIOs on a plain socket, fed first with the bytes the recorder already read."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, already_read: bytes) -> None:
        self.sock = sock
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.incoming.write(already_read)

    def _run(self, op: Callable[[], T]) -> T:
        while True:
            try:
                result = op()
            except ssl.SSLWantReadError:
                self._flush()
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("the client closed the connection") from None
                self.incoming.write(data)
                continue
            self._flush()
            return result

    def _flush(self) -> None:
        if pending := self.outgoing.read():
            self.sock.sendall(pending)

    def handshake(self) -> None:
        self._run(self.obj.do_handshake)

    def recv(self) -> bytes:
        try:
            return bytes(self._run(lambda: self.obj.read(65536)))
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            return b""

    def send(self, data: bytes) -> None:
        self._run(lambda: self.obj.write(data))


class _Buffered:
    def __init__(self, tls: _TLS) -> None:
        self.tls, self.buf = tls, bytearray()

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            data = self.tls.recv()
            if not data:
                raise ConnectionError("the client closed the connection")
            self.buf += data
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            data = self.tls.recv()
            if not data:
                raise ConnectionError("the client closed the connection")
            self.buf += data
        end = self.buf.index(marker) + len(marker)
        out = bytes(self.buf[:end])
        del self.buf[:end]
        return out


# --- HTTP/2 and HTTP/1.1 ---------------------------------------------------------------------------------

def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


class _H2Session:
    """Reads the client's frames, records its preface and first request, answers every request with PAGE."""

    def __init__(self, tls: _TLS, conn: Connection) -> None:
        self.tls, self.reader = tls, _Buffered(tls)
        self.preface = conn.h2 = H2Preface()
        self.conn = conn
        self.decoder, self.encoder = hpack.Decoder(), hpack.Encoder()
        self.block: bytearray | None = None  # a header block awaiting its CONTINUATION frames
        self.block_stream = 0
        self.first_request_seen = False

    def run(self) -> None:
        if self.reader.exactly(len(H2_PREFACE)) != H2_PREFACE:
            raise ValueError("not the HTTP/2 connection preface")
        self.tls.send(_frame(SETTINGS, 0, 0))
        while True:
            header = self.reader.exactly(9)
            length, kind, flags = int.from_bytes(header[:3], "big"), header[3], header[4]
            stream = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
            payload = self.reader.exactly(length)
            if not self.first_request_seen:
                self.preface.frames.append(FRAME_NAMES.get(kind, f"0x{kind:02x}"))
            if kind == GOAWAY:
                return
            self._frame(kind, flags, stream, payload)

    def _frame(self, kind: int, flags: int, stream: int, payload: bytes) -> None:
        first = not self.first_request_seen
        if kind == SETTINGS and not flags & ACK:
            if first:
                self.preface.settings += [struct.unpack("!HI", payload[i:i + 6]) for i in range(0, len(payload), 6)]
            self.tls.send(_frame(SETTINGS, ACK, 0))
        elif kind == WINDOW_UPDATE and stream == 0 and first and self.preface.window_update is None:
            self.preface.window_update = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
        elif kind == PRIORITY and first:
            depends, weight = int.from_bytes(payload[:4], "big"), payload[4] + 1
            self.preface.priority_frames.append((stream, depends & 0x7FFFFFFF, bool(depends >> 31), weight))
        elif kind == PING and not flags & ACK:
            self.tls.send(_frame(PING, ACK, 0, payload))
        elif kind == HEADERS:
            self._headers(flags, stream, payload)
        elif kind == CONTINUATION and self.block is not None:
            self.block += payload
            if flags & END_HEADERS:
                self._request(self.block_stream, bytes(self.block))

    def _headers(self, flags: int, stream: int, payload: bytes) -> None:
        body = payload
        if flags & PADDED:
            body = body[1:len(body) - body[0]]
        if flags & PRIORITY_FLAG:
            depends = int.from_bytes(body[:4], "big")
            if not self.first_request_seen:
                self.preface.headers_priority = (depends & 0x7FFFFFFF, bool(depends >> 31), body[4] + 1)
            body = body[5:]
        if flags & END_HEADERS:
            self._request(stream, body)
        else:
            self.block, self.block_stream = bytearray(body), stream

    def _request(self, stream: int, block: bytes) -> None:
        self.block = None
        headers = [(str(k), str(v)) for k, v in self.decoder.decode(block)]
        if not self.first_request_seen:
            self.first_request_seen = True
            self.preface.pseudo_headers = [k for k, _ in headers if k.startswith(":")]
            self.preface.headers = [(k, v) for k, v in headers if not k.startswith(":")]
            self.conn.path = dict(headers).get(":path")
        block_out = self.encoder.encode([(":status", "200"), ("content-type", "text/html; charset=utf-8"),
                                         ("content-length", str(len(PAGE)))])
        self.tls.send(_frame(HEADERS, END_HEADERS, stream, block_out) + _frame(DATA, END_STREAM, stream, PAGE))


def _serve_http1(tls: _TLS, conn: Connection) -> None:
    head = _Buffered(tls).until(b"\r\n\r\n").decode("latin-1")
    request_line, *lines = head.split("\r\n")
    conn.http1_headers = [(k, v.strip()) for k, _, v in (line.partition(":") for line in lines if ":" in line)]
    conn.path = request_line.split(" ")[1] if " " in request_line else None
    tls.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(PAGE), PAGE))


# --- the server ------------------------------------------------------------------------------------------

class TestCertificate:
    """A CA and a leaf it signed for HOST and 127.0.0.1, as PEM files in a private directory."""

    def __init__(self, where: Path) -> None:
        now = datetime.datetime.now(datetime.UTC)
        ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webfetch fingerprint test CA")])
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
              .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
              .not_valid_after(now + datetime.timedelta(days=1))
              .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
              .sign(ca_key, hashes.SHA256()))
        leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST),
                                                            x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                               critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .sign(ca_key, hashes.SHA256()))
        self.ca_file, self.cert_file, self.key_file = where / "ca.pem", where / "cert.pem", where / "key.pem"
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
        self.key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))
        spki = leaf.public_key().public_bytes(serialization.Encoding.DER,
                                              serialization.PublicFormat.SubjectPublicKeyInfo)
        # what --ignore-certificate-errors-spki-list takes: base64 of the SHA-256 of the leaf's SPKI
        self.spki_sha256 = base64.b64encode(hashlib.sha256(spki).digest()).decode()


class FingerprintRecorder:
    """`with FingerprintRecorder() as rec:` serves https://HOST:rec.port/ on 127.0.0.1 (map HOST there in the
    client) and keeps a Connection per client connection in rec.connections."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="wf-tls-")
        self.cert = TestCertificate(Path(self._dir.name))
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(self.cert.cert_file, self.cert.key_file)
        self.context.set_alpn_protocols(["h2", "http/1.1"])
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections: list[Connection] = []
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._stopped = False

    def url(self, path: str = "/") -> str:
        return f"https://{HOST}:{self.port}{path}"

    def start(self) -> FingerprintRecorder:
        threading.Thread(target=self._accept, daemon=True, name="tls-recorder").start()
        return self

    def stop(self) -> None:
        self._stopped = True
        self.listener.close()
        with self._lock:
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._dir.cleanup()

    def __enter__(self) -> FingerprintRecorder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def requests(self, path: str | None = None) -> list[Connection]:
        """The connections that carried a request (for `path`, when given), in the order they came."""
        with self._lock:
            return [c for c in self.connections if c.path is not None and (path is None or c.path == path)]

    def _accept(self) -> None:
        while not self._stopped:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self._open.add(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(IO_TIMEOUT_S)
        conn: Connection | None = None
        try:
            body, raw = read_client_hello(sock)
            conn = Connection(hello=parse_client_hello(body))
            with self._lock:
                self.connections.append(conn)
            tls = _TLS(sock, self.context, raw)
            tls.handshake()
            conn.alpn = tls.obj.selected_alpn_protocol()
            if conn.alpn == "h2":
                _H2Session(tls, conn).run()
            else:
                _serve_http1(tls, conn)
        except (OSError, ValueError, ssl.SSLError, hpack.HPACKError) as e:
            if conn is not None and conn.path is None:
                conn.error = f"{type(e).__name__}: {e}"
        finally:
            with self._lock:
                self._open.discard(sock)
            sock.close()
