"""The client sends the services' API key when the bench Job has one (VLLM_API_KEY from the Secret)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from bench.client import auth_headers, make_session


async def _seen_authorization(env_key: str | None, monkeypatch) -> str | None:
    seen: list[str | None] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.json_response({"data": []})

    app = web.Application()
    app.router.add_get("/v1/models", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    if env_key is None:
        monkeypatch.delenv("VLLM_API_KEY", raising=False)
    else:
        monkeypatch.setenv("VLLM_API_KEY", env_key)
    try:
        async with make_session() as session, session.get(f"http://127.0.0.1:{port}/v1/models") as resp:
            assert resp.status == 200
    finally:
        await runner.cleanup()
    (header,) = seen
    return header


def test_the_client_sends_the_api_key_as_a_bearer_token(monkeypatch):
    assert asyncio.run(_seen_authorization("s3cret", monkeypatch)) == "Bearer s3cret"


def test_no_key_no_authorization_header(monkeypatch):
    assert asyncio.run(_seen_authorization(None, monkeypatch)) is None
    assert auth_headers({"VLLM_API_KEY": ""}) == {}
