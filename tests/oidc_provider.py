"""A small OpenID Connect provider on 127.0.0.1 for the sign-in tests: discovery, an authorization endpoint that
signs in one configured account at once (no consent page), a token endpoint issuing RS256-signed ID tokens with
the request's nonce, and the JWKS to check them. Real HTTP, real signatures: Streamlit's `st.login` (Authlib)
talks to it exactly as to any provider."""
from __future__ import annotations

import base64
import http.server
import json
import secrets
import threading
import time
from urllib.parse import parse_qs, urlencode, urlparse

from joserfc import jwt
from joserfc.jwk import RSAKey


class Provider:
    def __init__(self, client_id: str, client_secret: str):
        self.client_id, self.client_secret = client_id, client_secret
        self.key = RSAKey.generate_key(2048, parameters={"kid": "test-key", "use": "sig", "alg": "RS256"})
        self.account = {"sub": "0", "email": "", "name": ""}       # who signs in next
        self.codes: dict[str, dict] = {}
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.issuer = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def metadata_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    def __enter__(self) -> "Provider":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _id_token(self, nonce: str | None) -> str:
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": self.client_id, "iat": now, "exp": now + 600, **self.account}
        if nonce:
            claims["nonce"] = nonce
        return jwt.encode({"alg": "RS256", "kid": "test-key"}, claims, self.key)

    def _handler(self):
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _json(self, body: dict, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                url = urlparse(self.path)
                if url.path == "/.well-known/openid-configuration":
                    return self._json({
                        "issuer": provider.issuer, "authorization_endpoint": f"{provider.issuer}/authorize",
                        "token_endpoint": f"{provider.issuer}/token", "jwks_uri": f"{provider.issuer}/jwks",
                        "response_types_supported": ["code"], "subject_types_supported": ["public"],
                        "id_token_signing_alg_values_supported": ["RS256"],
                        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"]})
                if url.path == "/jwks":
                    return self._json({"keys": [provider.key.as_dict(private=False)]})
                if url.path == "/authorize":
                    query = {k: v[0] for k, v in parse_qs(url.query).items()}
                    if query.get("client_id") != provider.client_id:
                        return self._json({"error": "unauthorized_client"}, 400)
                    code = secrets.token_urlsafe(16)
                    provider.codes[code] = {"nonce": query.get("nonce"), "redirect_uri": query["redirect_uri"]}
                    self.send_response(302)
                    self.send_header("Location", f"{query['redirect_uri']}?"
                                                 + urlencode({"code": code, "state": query.get("state", "")}))
                    self.end_headers()
                    return None
                return self._json({"error": "not_found"}, 404)

            def do_POST(self):  # noqa: N802
                body = {k: v[0] for k, v in parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode()).items()}
                basic = self.headers.get("Authorization", "")
                if basic.startswith("Basic "):
                    cid, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
                else:
                    cid, secret = body.get("client_id"), body.get("client_secret")
                grant = provider.codes.pop(body.get("code", ""), None)
                if (cid, secret) != (provider.client_id, provider.client_secret) or grant is None:
                    return self._json({"error": "invalid_grant"}, 400)
                return self._json({"access_token": secrets.token_urlsafe(16), "token_type": "Bearer",
                                   "expires_in": 600, "id_token": provider._id_token(grant["nonce"])})

            def log_message(self, *args):
                pass

        return Handler
