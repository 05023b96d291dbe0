"""Tools the model can call: typed functions, confirmed when they change things, confined to the workspace.

The agent needs only: `default_toolbox()`, `Toolbox.schemas()` for the request, and
`await toolbox.call(name, arguments_json, context)` returning a `ToolOutcome` (never raising, except
for cancellation). Front ends answer `ConfirmationRequest`s with a `Decision`.
"""

from __future__ import annotations

from xun.agent.tools.builtin import BUILTIN_TOOLS, default_toolbox
from xun.agent.tools.confinement import PathOutsideWorkspace, resolve_in_workspace
from xun.agent.tools.toolbox import (
    CONFIRM_GUARD_SECONDS,
    CONFIRM_KEYS,
    ReclaimedOriginals,
    ConfirmationRequest,
    ConfirmCallback,
    Decision,
    RecallLookup,
    Tool,
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolResult,
    Toolbox,
    cap_text,
    tool,
)

__all__ = [
    "BUILTIN_TOOLS",
    "CONFIRM_GUARD_SECONDS",
    "CONFIRM_KEYS",
    "ReclaimedOriginals",
    "ConfirmCallback",
    "ConfirmationRequest",
    "Decision",
    "RecallLookup",
    "PathOutsideWorkspace",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "ToolResult",
    "Toolbox",
    "cap_text",
    "default_toolbox",
    "resolve_in_workspace",
    "tool",
]
