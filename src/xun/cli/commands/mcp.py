"""`xun mcp list`: the configured MCP servers, started for the listing: state, tools, and what their
definitions cost in every request (tokens estimated at the default characters per token)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from xun.cli.console import Visible
from xun.cli.exits import EXIT_FAILED, EXIT_OK
from xun.cli.commands.common import InterruptGuard, workdir_of


def main(args: argparse.Namespace) -> int:
    from xun.base import paths
    from xun.agent.config import load_config
    from xun.agent.tools import Toolbox
    from xun.agent.tools.mcp import McpManager

    folder = workdir_of(args)
    config = load_config(folder, args.overrides)
    manager = McpManager(config.mcp, Toolbox(), workdir=folder, log_dir=paths.xun_home(folder) / "mcp")
    if not manager:
        print(
            f"no MCP servers are configured; add [mcp.servers.NAME] to the user config ({paths.user_config_path()})",
            file=sys.stderr,
        )
        return EXIT_OK
    rows = asyncio.run(_listing(manager))
    out = Visible(sys.stdout, json_lines=bool(args.json))  # names, descriptions and errors come from the servers
    if args.json:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        for row in rows:
            head = f"{row['name']}  {row['summary']}  ({row['transport']}: {row['target']})"
            if row["tools"]:
                head += f"  definitions ~{row['definition_tokens']:,} tokens per request"
            out.write(head + ("  trusted" if row["trust"] else "") + "\n")
            for item in row["tools"]:
                out.write(f"  {item['name']}  ~{item['tokens']:,} tokens  {item['description']}\n")
            for skipped in row["skipped"]:
                out.write(f"  (not offered) {skipped}\n")
    return EXIT_OK if all(row["state"] in ("ready", "disabled") for row in rows) else EXIT_FAILED


async def _listing(manager: Any) -> list[dict[str, Any]]:
    from xun.context.conversation import DEFAULT_TOKENS_PER_CHAR

    with InterruptGuard() as guard:
        try:
            await guard.run(manager.start())
            sizes = manager.definition_chars()
            rows = []
            for server in manager.servers.values():
                tools = []
                for item in server.tools:
                    chars = len(json.dumps(item.schema(), ensure_ascii=False))
                    tools.append(
                        {
                            "name": item.name,
                            "tokens": round(chars * DEFAULT_TOKENS_PER_CHAR),
                            "description": " ".join(item.description.split("\n\n")[0].split())[:100],
                        }
                    )
                rows.append(
                    {
                        "name": server.name,
                        "state": server.state,
                        "summary": server.summary(),
                        "reason": server.reason,
                        "transport": server.transport,
                        "target": server.target,
                        "trust": server.settings.trust,
                        "definition_tokens": round(sizes.get(server.name, 0) * DEFAULT_TOKENS_PER_CHAR),
                        "tools": tools,
                        "skipped": list(server.skipped),
                    }
                )
            return rows
        finally:
            await manager.aclose()
