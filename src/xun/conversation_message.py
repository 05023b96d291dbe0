"""The seed's home of the typed messages (`src/xun/conversation_message.py`); they live in
`xun.context.messages`, and this module keeps the seed's import path working."""

from xun.context.messages import *  # noqa: F403
