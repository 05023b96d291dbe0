"""A small MCP server written with the SDK, for the faults real servers rarely show on demand.

    python fault_server.py [crash-at-start | hang-at-start | serve | http PORT]

`http PORT` serves the same tools over streamable HTTP on 127.0.0.1:PORT/mcp, and answers 401 to a request
whose Authorization header is not `Bearer $FAULT_SERVER_TOKEN`.

`serve` offers: echo, getenv, big (a result of `size` characters, 5 MB by default), words (a recognisable text of
`size` characters), crash (the process exits in the middle of the call), fail (a tool error), slow
(sleeps `seconds`), picture (an image and a binary resource beside a line of text), and bad_schema, whose
input schema is not valid JSON Schema (the SDK's server refuses non-object schemas itself).
"""

from __future__ import annotations

import base64
import os
import sys
import time

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def text_tool(
    name: str, description: str, properties: dict | None = None, required: list[str] | None = None
) -> types.Tool:
    schema = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = required
    return types.Tool(name=name, description=description, input_schema=schema)


TOOLS = [
    text_tool("echo", "Echo the text back.", {"text": {"type": "string"}}, ["text"]),
    text_tool("big", "Return `size` characters (5 MB by default).", {"size": {"type": "integer"}}),
    text_tool("words", "Return a recognisable text of about `size` characters.", {"size": {"type": "integer"}}),
    text_tool("getenv", "The value of an environment variable of the server.", {"name": {"type": "string"}}, ["name"]),
    text_tool("crash", "Exit the server in the middle of the call."),
    text_tool("fail", "Return a tool error."),
    text_tool("slow", "Sleep `seconds`, then answer.", {"seconds": {"type": "number"}}),
    text_tool("picture", "Return an image and a binary resource beside a line of text."),
    types.Tool(
        name="bad_schema",
        description="Its schema is not valid JSON Schema.",
        input_schema={"type": "object", "properties": {"x": {"type": "no-such-type"}}},
    ),
]


async def list_tools(ctx, params) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


def words(size: int) -> str:
    line = "MCP-FAULT-WORDS quartz lantern {n:06d} the fox ran far and sat low\n"
    out, n = [], 0
    total = 0
    while total < size:
        piece = line.format(n=n)
        out.append(piece)
        total += len(piece)
        n += 1
    return "".join(out)[:size]


async def call_tool(ctx, params) -> types.CallToolResult:
    arguments = params.arguments or {}
    name = params.name
    text = lambda value: types.CallToolResult(content=[types.TextContent(type="text", text=value)])  # noqa: E731
    if name == "echo":
        return text(str(arguments.get("text", "")))
    if name == "big":
        return text("x" * int(arguments.get("size", 5_000_000)))
    if name == "words":
        return text(words(int(arguments.get("size", 60_000))))
    if name == "getenv":
        return text(os.environ.get(str(arguments.get("name")), "(unset)"))
    if name == "crash":
        print("fault server: crashing in the middle of a call", file=sys.stderr, flush=True)
        os._exit(7)
    if name == "fail":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="the fail tool always fails")], is_error=True
        )
    if name == "slow":
        await anyio.sleep(float(arguments.get("seconds", 60)))
        return text("slept")
    if name == "picture":
        png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 992).decode()
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="a picture follows"),
                types.ImageContent(type="image", data=png, mime_type="image/png"),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.BlobResourceContents(
                        uri="file:///data.bin", mime_type="application/octet-stream", blob=png
                    ),
                ),
            ]
        )
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"no tool {name}")], is_error=True)


async def serve() -> None:
    server = Server("xun-fault-server", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_http(port: int) -> None:
    import uvicorn
    from starlette.responses import PlainTextResponse

    server = Server("xun-fault-server", on_list_tools=list_tools, on_call_tool=call_tool)
    app = server.streamable_http_app()
    expected = f"Bearer {os.environ['FAULT_SERVER_TOKEN']}"

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != expected:
                await PlainTextResponse("a bearer token is needed", status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "serve"
    if mode == "crash-at-start":
        print("fault server: crashing at start as asked", file=sys.stderr, flush=True)
        sys.exit(3)
    if mode == "hang-at-start":
        print(f"fault server: hanging, pid {os.getpid()}", file=sys.stderr, flush=True)
        while True:
            time.sleep(3600)
    if mode == "http":
        serve_http(int(sys.argv[2]))
        sys.exit(0)
    anyio.run(serve)
