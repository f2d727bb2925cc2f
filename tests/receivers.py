"""Where the notification tests' messages arrive: a real SMTP server (aiosmtpd, with login) and
an HTTP receiver that answers as a Slack incoming webhook does ("ok"), each on a free local port,
and the Airflow connections that point at them (as environment variables, as a deployment's
secrets backend would hand them over)."""

from __future__ import annotations

import email
import json
import threading
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from onceflow.local.service import free_port

SMTP_LOGIN, SMTP_PASSWORD = "onceflow", "smtp-Secret-4711"
WEBHOOK_TOKEN = "T0NCE/B0FL0W/webhook-Secret-0815"


class MailServer:
    """An SMTP server that takes mail after a login with SMTP_LOGIN/SMTP_PASSWORD."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.arrived: list[float] = []
        self.port = free_port()

        server = self

        class Handler:
            async def handle_DATA(self, smtp, session, envelope):
                import time

                server.messages.append(email.message_from_bytes(envelope.content))
                server.arrived.append(time.time())
                return "250 OK"

        def authenticate(smtp, session, envelope, mechanism, auth_data):
            ok = auth_data.login.decode() == SMTP_LOGIN and auth_data.password.decode() == SMTP_PASSWORD
            return AuthResult(success=ok)

        self.controller = Controller(
            Handler(),
            hostname="127.0.0.1",
            port=self.port,
            authenticator=authenticate,
            auth_required=True,
            auth_require_tls=False,
        )

    def __enter__(self) -> MailServer:
        self.controller.start()
        return self

    def __exit__(self, *exc) -> None:
        self.controller.stop()

    def connection(self) -> str:
        """The Airflow `smtp` connection, as AIRFLOW_CONN_<ID> JSON."""
        return json.dumps(
            {
                "conn_type": "smtp",
                "host": "127.0.0.1",
                "port": self.port,
                "login": SMTP_LOGIN,
                "password": SMTP_PASSWORD,
                "extra": {"disable_ssl": True, "disable_tls": True, "from_email": "onceflow@example.test"},
            }
        )

    def bodies(self) -> list[str]:
        out = []
        for message in self.messages:
            parts = message.walk() if message.is_multipart() else [message]
            html = [p.get_payload(decode=True) for p in parts if p.get_content_type() == "text/html"]
            out.append("".join(h.decode() for h in html if isinstance(h, bytes)))
        return out


class WebhookReceiver:
    """An HTTP server that records each POST (path and JSON body) and answers "ok"."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict]] = []
        self.arrived: list[float] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                import time

                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.posts.append((self.path, json.loads(body)))
                receiver.arrived.append(time.time())
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def connection(self) -> str:
        """The Airflow `slackwebhook` connection: the endpoint in host, the token in password."""
        return json.dumps(
            {"conn_type": "slackwebhook", "host": f"http://127.0.0.1:{self.port}/services", "password": WEBHOOK_TOKEN}
        )

    def texts(self) -> list[str]:
        return [body.get("text", "") for _, body in self.posts]


NOTIFY = {
    "email": {"connection": "onceflow_smtp", "to": ["oncall@example.test"]},
    "slack": {"connection": "onceflow_slack"},
}


def use_receivers(monkeypatch, mail: MailServer, hook: WebhookReceiver) -> None:
    """The connections NOTIFY names, pointing at the two receivers."""
    monkeypatch.setenv("AIRFLOW_CONN_ONCEFLOW_SMTP", mail.connection())
    monkeypatch.setenv("AIRFLOW_CONN_ONCEFLOW_SLACK", hook.connection())
