"""The import path of `Conversation` in the seed's API (`from xun.conversation import Conversation`, as
xun-agent and tools written for it import it); the conversation lives in `xun.context.conversation`."""

from xun.context.conversation import *  # noqa: F403
from xun.context.conversation import Conversation  # noqa: F401
