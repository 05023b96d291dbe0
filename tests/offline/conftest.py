"""Clients and tool schemas for the offline server's tests."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest


def tool_schema(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A function tool the way the agent's toolbox declares one."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"the {name} tool",
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


STRING = {"type": "string"}
BUILTIN_TOOLS = [
    tool_schema(
        "read_file",
        {"path": STRING, "offset": {"type": "integer", "default": 0}, "limit": {"type": "integer", "default": 2000}},
        ["path"],
    ),
    tool_schema("list_directory", {"path": STRING}, ["path"]),
    tool_schema("search_text", {"pattern": STRING, "path": STRING}, ["pattern"]),
    tool_schema("run_command", {"command": STRING, "timeout": {"type": "integer", "default": 60}}, ["command"]),
    tool_schema("write_file", {"path": STRING, "content": STRING}, ["path", "content"]),
    tool_schema("extract_compacted_tool_result", {"toolcall_id": STRING}, ["toolcall_id"]),
]


def only_tools(*names: str) -> list[dict[str, Any]]:
    return [tool for tool in BUILTIN_TOOLS if tool["function"]["name"] in names]


def calls_of(message: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, arguments) of every tool call in an SDK message."""
    return [(call.function.name, json.loads(call.function.arguments)) for call in message.tool_calls or []]


@pytest.fixture
def client(offline_server) -> openai.OpenAI:
    return openai.OpenAI(base_url=offline_server.base_url, api_key="offline", max_retries=0, timeout=10)


@pytest.fixture
def async_client(offline_server) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=offline_server.base_url, api_key="offline", max_retries=0, timeout=10)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


class StreamResult:
    """What a streamed reply added up to, accumulated the way an agent does."""

    def __init__(self, chunks: list[Any]):
        self.chunks = chunks
        self.content = ""
        self.reasoning = ""
        self.finish_reason = None
        self.usage = None
        self.tool_calls: dict[int, dict[str, Any]] = {}
        for chunk in chunks:
            if chunk.usage is not None:
                self.usage = chunk.usage
            for choice in chunk.choices:
                delta = choice.delta
                self.content += delta.content or ""
                extra = delta.model_extra or {}
                self.reasoning += extra.get("reasoning_content") or extra.get("reasoning") or ""
                for call in delta.tool_calls or []:
                    slot = self.tool_calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                    if call.id:
                        slot["id"] = call.id
                    if call.function and call.function.name:
                        slot["name"] += call.function.name
                    if call.function and call.function.arguments:
                        slot["arguments"] += call.function.arguments
                if choice.finish_reason:
                    self.finish_reason = choice.finish_reason

    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        return [(slot["name"], json.loads(slot["arguments"])) for _, slot in sorted(self.tool_calls.items())]
