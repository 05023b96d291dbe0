"""The agent: the async loop on the OpenAI SDK (`loop.Agent`), its tools (built-in and MCP), the settings,
folder trust, the model's context window, and `launch`, which opens a session for a front end.

May import: `xun.base`, `xun.context`, `xun.compact`, and `xun.offline` (the embedded model server that
`launch` starts when no API key is set).
"""
