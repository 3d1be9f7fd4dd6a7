"""A tiny ASGI app shaped like vLLM's OpenAI server behind --api-key, for
test_boundary.py: under /v1 a request without "Authorization: Bearer good" is
answered 401 at once, its body unread (vLLM's authentication middleware);
unknown paths get 404 from the router, body unread; with the key,
/v1/chat/completions and /v1/score read the body and echo the client's
X-Client header with the body's length and SHA-256.

run: python3 -m uvicorn early_app:app --host 127.0.0.1 --port P --no-access-log
"""
import hashlib

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route


async def authentication(request, call_next):
    if not request.url.path.startswith("/v1"):
        return await call_next(request)
    if request.headers.get("Authorization") != "Bearer good":
        return JSONResponse({"error": "Unauthorized", "client": request.headers.get("X-Client")},
                            status_code=401)
    return await call_next(request)


async def echo(request):
    body = await request.body()
    return JSONResponse({"client": request.headers.get("X-Client"), "path": request.url.path,
                         "len": len(body), "sha256": hashlib.sha256(body).hexdigest()})


async def health(request):
    return PlainTextResponse("ok")


async def not_found(request, exc):
    return JSONResponse({"error": "Not Found", "client": request.headers.get("X-Client")},
                        status_code=404)


app = Starlette(routes=[Route("/health", health),
                        Route("/v1/chat/completions", echo, methods=["POST"]),
                        Route("/v1/score", echo, methods=["POST"])],
                middleware=[Middleware(BaseHTTPMiddleware, dispatch=authentication)],
                exception_handlers={404: not_found})
