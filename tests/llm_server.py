"""A scripted stand-in for the Anthropic Messages API and the OpenAI Chat Completions API.

The real SDKs talk to it over HTTP on 127.0.0.1 (``ANTHROPIC_BASE_URL=server.anthropic_base_url``,
``OPENAI_BASE_URL=server.openai_base_url``). It answers ``POST /v1/messages`` and
``POST /v1/chat/completions`` from a queue of ``Scripted`` responses (a text, or an HTTP error with
the provider's error body), checks that each request has the fields the API requires (else 400), and
records every request (path, headers without the credentials, JSON body) for tests to assert on.
A 401 echoes the key it received, as a careless server might, so that tests can check redaction;
``malformed`` sends a 200 with a broken body and ``hanging`` answers only after a delay.
An empty queue answers 500, so a test never passes on an unplanned call, unless a ``responder`` is
set: a function of the request that computes the reply from the prompt (``tests/llm_responders.py``:
golden-question writing and judging, deterministically). Left out: streaming, tools.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

CREDENTIAL_HEADERS = {"authorization", "x-api-key", "api-key"}


@dataclass(frozen=True)
class Scripted:
    """One response: ``text`` with status 200, or an error ``status`` (401, 429, 400, 500, 529)."""

    text: str = ""
    status: int = 200
    message: str | None = None  # error message (a default per status otherwise)
    headers: dict[str, str] = field(default_factory=dict)
    model: str | None = None  # model reported in the reply (default: the one requested + "-test")
    input_tokens: int = 42
    output_tokens: int = 7
    raw_body: str | None = None  # sent as is (with ``status``) instead of a well-formed reply
    delay_s: float = 0.0  # wait this long before answering (a hanging server)


def reply(text: str, **kwargs: Any) -> Scripted:
    return Scripted(text=text, **kwargs)


def rate_limited(retry_after: str = "0") -> Scripted:
    return Scripted(status=429, headers={"retry-after": retry_after})


def malformed(body: str) -> Scripted:
    """HTTP 200 whose body is not the API's JSON (or not JSON at all)."""
    return Scripted(raw_body=body)


def hanging(seconds: float) -> Scripted:
    """A reply that comes only after ``seconds``: longer than the client's timeout, it never arrives."""
    return Scripted(text="too late", delay_s=seconds)


def prompt_too_long() -> Scripted:
    return Scripted(status=400, message="prompt is too long: 250000 tokens > 200000 maximum")


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-cased names, credentials removed
    body: dict[str, Any]
    had_credentials: bool

    @property
    def system(self) -> str:
        """The system prompt, for either API."""
        if "system" in self.body:
            system = self.body["system"]
            return system if isinstance(system, str) else "".join(block.get("text", "") for block in system)
        return "".join(m["content"] for m in self.body.get("messages", []) if m.get("role") == "system")

    @property
    def user(self) -> str:
        """The user message(s), concatenated."""
        parts = []
        for message in self.body.get("messages", []):
            if message.get("role") != "user":
                continue
            content = message["content"]
            parts.append(content if isinstance(content, str) else "".join(b.get("text", "") for b in content))
        return "\n".join(parts)

    @property
    def max_tokens(self) -> int | None:
        return self.body.get("max_tokens", self.body.get("max_completion_tokens"))


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error",
}
_DEFAULT_MESSAGES = {
    401: "invalid x-api-key: {key}",
    429: "Number of request tokens has exceeded your per-minute rate limit",
    500: "Internal server error",
    529: "Overloaded",
}


class FakeLLMServer:
    def __init__(self) -> None:
        self.queue: deque[Scripted] = deque()
        self.requests: list[RecordedRequest] = []
        self.responder: Callable[[RecordedRequest], Scripted | str] | None = None  # used when the queue is empty
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> "FakeLLMServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def anthropic_base_url(self) -> str:
        return self.url  # the SDK appends /v1/messages

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"  # the SDK appends /chat/completions

    # --- scripting ----------------------------------------------------------------------------
    def script(self, *responses: Scripted | str) -> None:
        with self._lock:
            self.queue.extend(r if isinstance(r, Scripted) else reply(r) for r in responses)

    def _next(self) -> Scripted | None:
        with self._lock:
            return self.queue.popleft() if self.queue else None

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("content-length", 0))
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {"_unparseable": raw.decode("utf-8", "replace")}
            headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in CREDENTIAL_HEADERS}
            key = self.headers.get("x-api-key") or self.headers.get("authorization", "").removeprefix("Bearer ")
            recorded = RecordedRequest(self.path, headers, body, had_credentials=bool(key))
            server._record(recorded)
            if self.path == "/v1/messages":
                api = "anthropic"
            elif self.path == "/v1/chat/completions":
                api = "openai"
            else:
                return self._send(404, {"error": {"type": "not_found_error", "message": f"no route {self.path}"}})
            problem = _check_request(api, body)
            if problem:
                return self._error(api, Scripted(status=400, message=problem), key)
            scripted = server._next()
            if scripted is None and server.responder is not None:
                answer = server.responder(recorded)
                scripted = answer if isinstance(answer, Scripted) else reply(answer)
            if scripted is None:
                return self._error(api, Scripted(status=500, message="fake server: no scripted response left"), key)
            if scripted.delay_s:
                time.sleep(scripted.delay_s)
            if scripted.raw_body is not None:
                return self._send_raw(scripted.status, scripted.raw_body.encode())
            if scripted.status != 200:
                return self._error(api, scripted, key)
            model = scripted.model or f"{body['model']}-test"
            if api == "anthropic":
                payload = {
                    "id": "msg_test", "type": "message", "role": "assistant", "model": model,
                    "content": [{"type": "text", "text": scripted.text}],
                    "stop_reason": "end_turn", "stop_sequence": None,
                    "usage": {"input_tokens": scripted.input_tokens, "output_tokens": scripted.output_tokens},
                }
            else:
                payload = {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": 1_700_000_000, "model": model,
                    "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                 "message": {"role": "assistant", "content": scripted.text, "refusal": None}}],
                    "usage": {"prompt_tokens": scripted.input_tokens, "completion_tokens": scripted.output_tokens,
                              "total_tokens": scripted.input_tokens + scripted.output_tokens},
                }
            self._send(200, payload, scripted.headers)

        def _error(self, api: str, scripted: Scripted, key: str) -> None:
            message = (scripted.message or _DEFAULT_MESSAGES.get(scripted.status, "error")).replace("{key}", key)
            if api == "anthropic":
                error_type = _ANTHROPIC_ERROR_TYPES.get(scripted.status, "api_error")
                payload = {"type": "error", "error": {"type": error_type, "message": message}, "request_id": "req_test"}
            else:
                code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(scripted.status)
                if "too long" in message:
                    code = "context_length_exceeded"
                payload = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
            self._send(scripted.status, payload, scripted.headers)

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            self._send_raw(status, json.dumps(payload).encode(), headers)

        def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", "req_test")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                pass

    return Handler


def _check_request(api: str, body: dict[str, Any]) -> str | None:
    """What the real API would reject with a 400, or None."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if api == "anthropic":
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            return "max_tokens: field required"
        if any(m.get("role") not in ("user", "assistant") for m in messages):
            return "messages: roles must be user or assistant (system goes in the system field)"
    elif not any(m.get("role") == "user" for m in messages):
        return "messages: a user message is required"
    return None
