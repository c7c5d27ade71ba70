"""A small OAuth 2 identity provider for the OAUTHBEARER tests: a token endpoint (client
credentials grant, HTTP basic authentication) that signs RS256 JWTs with the test's key, and
the JWKS document brokers validate them with.

    idp = Idp(clients={"broker": "broker-secret"}).start()
    idp.token_url, idp.jwks_path(tmp_path)      # for sasl.oauthbearer.token.endpoint.url / jwks
    idp.requests                                # [(client id, form fields)] seen so far
    idp.fail_next(503, 2)                       # the next two requests answer 503
"""
from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Idp:
    def __init__(self, clients: dict[str, str], lifetime_s: int = 600, audience: str = "kafka",
                 issuer: str = "https://idp.test", kid: str = "k1"):
        from cryptography.hazmat.primitives.asymmetric import rsa
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.clients = dict(clients)
        self.lifetime_s, self.audience, self.issuer, self.kid = lifetime_s, audience, issuer, kid
        self.requests: list[tuple[str | None, dict]] = []
        self._failures: list[int] = []
        self._server: ThreadingHTTPServer | None = None

    def sign(self, claims: dict) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding
        h = b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": self.kid}).encode())
        c = b64(json.dumps(claims).encode())
        return f"{h}.{c}.{b64(self.key.sign(f'{h}.{c}'.encode(), padding.PKCS1v15(), hashes.SHA256()))}"

    def jwks(self) -> dict:
        pub = self.key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
                          "n": b64(pub.n.to_bytes((pub.n.bit_length() + 7) // 8, "big")),
                          "e": b64(pub.e.to_bytes(3, "big"))}]}

    def jwks_path(self, directory) -> str:
        path = directory / "jwks.json"
        path.write_text(json.dumps(self.jwks()))
        return path.as_uri()

    def fail_next(self, status: int, times: int = 1) -> None:
        self._failures += [status] * times

    @property
    def token_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/token"

    def start(self) -> "Idp":
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status: int, doc: dict) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                form = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()))
                client = secret = None
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    raw = base64.b64decode(auth[6:]).decode()
                    client, _, secret = (urllib.parse.unquote(x) for x in raw.partition(":"))
                idp.requests.append((client, form))
                if idp._failures:
                    return self._answer(idp._failures.pop(0), {"error": "temporarily_unavailable"})
                if form.get("grant_type") != "client_credentials":
                    return self._answer(400, {"error": "unsupported_grant_type"})
                if client not in idp.clients or idp.clients[client] != secret:
                    return self._answer(401, {"error": "invalid_client"})
                now = int(time.time())
                claims = {"sub": client, "iat": now, "exp": now + idp.lifetime_s, "aud": idp.audience,
                          "iss": idp.issuer}
                if form.get("scope"):
                    claims["scope"] = form["scope"]
                self._answer(200, {"access_token": idp.sign(claims), "token_type": "Bearer",
                                   "expires_in": idp.lifetime_s})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
