"""Parsing and checking chat-completion requests, and the OpenAI error shape.

Bad input must come back as an HTTP 400 with an error body OpenAI clients understand, never as a crash,
so every check here raises `RequestError` naming the offending parameter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MODEL_ID = "xun-offline"
VALID_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


class RequestError(Exception):
    """A request the server refuses; carries the HTTP status and OpenAI's error fields."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        error_type: str = "invalid_request_error",
    ):
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.code = code
        self.error_type = error_type

    def body(self) -> dict[str, Any]:
        """The JSON body OpenAI sends with an error."""
        return error_body(self.message, self.error_type, self.param, self.code)


def error_body(message: str, error_type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error object: `{"error": {"message", "type", "param", "code"}}`."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


@dataclass
class ChatRequest:
    """The parts of a chat-completion request the scripted model and the responder use."""

    messages: list[dict[str, Any]]
    model: str = MODEL_ID
    tools: list[dict[str, Any]] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool = True

    @property
    def offered_tool_names(self) -> list[str]:
        """Names of the function tools this request offers, in order (none when tool_choice is "none")."""
        if self.tool_choice == "none":
            return []
        return [tool["function"]["name"] for tool in self.tools if tool.get("type", "function") == "function"]

    def tool_schema(self, name: str) -> Mapping[str, Any]:
        """The JSON schema of an offered tool's parameters ({} when it has none)."""
        for tool in self.tools:
            function = tool["function"]
            if function["name"] == name:
                parameters = function.get("parameters")
                return parameters if isinstance(parameters, Mapping) else {}
        return {}


def _type_name(value: Any) -> str:
    """JSON's name for a Python value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _invalid_type(param: str, expected: str, value: Any) -> RequestError:
    return RequestError(
        f"Invalid type for '{param}': expected {expected}, but got {_type_name(value)}.",
        param=param,
        code="invalid_type",
    )


def _check_content(content: Any, param: str, role: str) -> None:
    """A message content is a string, null (assistant only), or a list of typed parts."""
    if content is None:
        if role in ("user", "system", "developer"):
            raise RequestError(
                f"Missing content for '{param}': {role} messages need content.", param=param, code="invalid_value"
            )
        return
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _invalid_type(param, "a string or an array of content parts", content)
    for part_index, part in enumerate(content):
        part_param = f"{param}[{part_index}]"
        if not isinstance(part, dict):
            raise _invalid_type(part_param, "an object", part)
        part_type = part.get("type")
        if not isinstance(part_type, str):
            raise RequestError(
                f"Missing required parameter: '{part_param}.type'.",
                param=f"{part_param}.type",
                code="missing_required_parameter",
            )
        if part_type == "text" and not isinstance(part.get("text"), str):
            raise _invalid_type(f"{part_param}.text", "a string", part.get("text"))


def _check_tool_calls(tool_calls: Any, param: str) -> None:
    if not isinstance(tool_calls, list):
        raise _invalid_type(param, "an array", tool_calls)
    for call_index, call in enumerate(tool_calls):
        call_param = f"{param}[{call_index}]"
        if not isinstance(call, dict):
            raise _invalid_type(call_param, "an object", call)
        if not isinstance(call.get("id"), str):
            raise RequestError(
                f"Missing required parameter: '{call_param}.id'.",
                param=f"{call_param}.id",
                code="missing_required_parameter",
            )
        function = call.get("function")
        if not isinstance(function, dict):
            raise _invalid_type(f"{call_param}.function", "an object", function)
        if not isinstance(function.get("name"), str):
            raise _invalid_type(f"{call_param}.function.name", "a string", function.get("name"))
        if not isinstance(function.get("arguments", ""), str):
            raise _invalid_type(f"{call_param}.function.arguments", "a string", function.get("arguments"))


def _check_message(message: Any, index: int) -> None:
    param = f"messages[{index}]"
    if not isinstance(message, dict):
        raise _invalid_type(param, "an object", message)
    role = message.get("role")
    if role is None:
        raise RequestError(
            f"Missing required parameter: '{param}.role'.", param=f"{param}.role", code="missing_required_parameter"
        )
    if role not in VALID_ROLES:
        raise RequestError(
            f"Invalid value for '{param}.role': {role!r}; supported roles are {', '.join(VALID_ROLES)}.",
            param=f"{param}.role",
            code="invalid_value",
        )
    if "content" not in message and role != "assistant":
        raise RequestError(
            f"Missing required parameter: '{param}.content'.",
            param=f"{param}.content",
            code="missing_required_parameter",
        )
    _check_content(message.get("content"), f"{param}.content", role)
    if "name" in message and not isinstance(message["name"], str):
        raise _invalid_type(f"{param}.name", "a string", message["name"])
    for reasoning_field in ("reasoning_content", "reasoning"):
        value = message.get(reasoning_field)
        if value is not None and not isinstance(value, (str, dict, list)):
            raise _invalid_type(f"{param}.{reasoning_field}", "a string", value)
    if role == "assistant" and message.get("tool_calls") is not None:
        _check_tool_calls(message["tool_calls"], f"{param}.tool_calls")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise RequestError(
            f"Missing required parameter: '{param}.tool_call_id' (a string).",
            param=f"{param}.tool_call_id",
            code="missing_required_parameter",
        )


def _check_tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise _invalid_type("tools", "an array", tools)
    names: set[str] = set()
    for tool_index, tool in enumerate(tools):
        param = f"tools[{tool_index}]"
        if not isinstance(tool, dict):
            raise _invalid_type(param, "an object", tool)
        tool_type = tool.get("type", "function")
        if tool_type != "function":
            raise RequestError(
                f"Invalid value for '{param}.type': only 'function' tools are supported.",
                param=f"{param}.type",
                code="invalid_value",
            )
        function = tool.get("function")
        if not isinstance(function, dict):
            raise _invalid_type(f"{param}.function", "an object", function)
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise RequestError(
                f"Missing required parameter: '{param}.function.name'.",
                param=f"{param}.function.name",
                code="missing_required_parameter",
            )
        if name in names:
            raise RequestError(
                f"Duplicate tool name {name!r} in 'tools'.", param=f"{param}.function.name", code="invalid_value"
            )
        names.add(name)
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise _invalid_type(f"{param}.function.parameters", "an object", parameters)
    return tools


def _optional_positive_int(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid_type(key, "an integer", value)
    if value < 1:
        raise RequestError(
            f"Invalid '{key}': integer below minimum value. Expected a value >= 1, but got {value} instead.",
            param=key,
            code="integer_below_min_value",
        )
    return value


def parse_chat_request(raw_body: bytes) -> ChatRequest:
    """Decode and check a chat-completion request body; raise RequestError on anything malformed."""
    try:
        body = json.loads(raw_body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        reason = "the body is empty" if not raw_body.strip() else str(exc)
        raise RequestError(
            f"We could not parse the JSON body of your request ({reason}). The OpenAI API expects a JSON payload."
        ) from None
    if not isinstance(body, dict):
        raise RequestError(f"The request body must be a JSON object, but got {_type_name(body)}.", code="invalid_type")
    if "messages" not in body:
        raise RequestError(
            "Missing required parameter: 'messages'.", param="messages", code="missing_required_parameter"
        )
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _invalid_type("messages", "an array", messages)
    if not messages:
        raise RequestError(
            "Invalid 'messages': empty array. Expected an array with minimum length 1.",
            param="messages",
            code="empty_array",
        )
    for index, message in enumerate(messages):
        _check_message(message, index)
    model = body.get("model", MODEL_ID)
    if not isinstance(model, str):
        raise _invalid_type("model", "a string", model)
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise _invalid_type("stream", "a boolean", stream)
    stream_options = body.get("stream_options")
    include_usage = False
    if stream_options is not None:
        if not isinstance(stream_options, dict):
            raise _invalid_type("stream_options", "an object", stream_options)
        include_usage_value = stream_options.get("include_usage", False)
        if not isinstance(include_usage_value, bool):
            raise _invalid_type("stream_options.include_usage", "a boolean", include_usage_value)
        include_usage = include_usage_value
    max_tokens = _optional_positive_int(body, "max_completion_tokens")
    legacy_max_tokens = _optional_positive_int(body, "max_tokens")
    if max_tokens is None:
        max_tokens = legacy_max_tokens
    n = body.get("n")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n != 1):
        raise RequestError(
            "Invalid 'n': the offline server returns exactly one choice (n must be 1).", param="n", code="invalid_value"
        )
    tools = _check_tools(body.get("tools"))
    tool_choice = body.get("tool_choice")
    if tool_choice is not None and not isinstance(tool_choice, (str, dict)):
        raise _invalid_type("tool_choice", "a string or an object", tool_choice)
    parallel_tool_calls = body.get("parallel_tool_calls", True)
    if parallel_tool_calls is None:
        parallel_tool_calls = True
    if not isinstance(parallel_tool_calls, bool):
        raise _invalid_type("parallel_tool_calls", "a boolean", parallel_tool_calls)
    return ChatRequest(
        messages=messages,
        model=model,
        tools=tools,
        stream=stream,
        include_usage=include_usage,
        max_tokens=max_tokens,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls,
    )
