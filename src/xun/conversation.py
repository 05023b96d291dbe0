"""The import path of `Conversation` in the seed's API (`from xun.conversation import Conversation`, as
xun-agent and tools written for it import it); the conversation lives in `xun.context.conversation`."""

from xun.context.conversation import *  # noqa: F403
from xun.context.conversation import Conversation  # noqa: F401

# Names this path offered while the conversation module held them all, before its helpers moved out.
from xun.base.timestamps import sane_timestamp  # noqa: F401
from xun.context.ledger import TurnLedger, condensed_calls  # noqa: F401
from xun.context.messages import TURN_LEDGER_PROMPT, MessageFormatError, check_raw, message_from_json  # noqa: F401
from xun.context.reclaimed import (  # noqa: F401
    ARGUMENTS,
    ARGUMENTS_PREVIEW,
    ARGUMENTS_RECLAIM_AT,
    ReclaimedToolResult,
    arguments_id,
    arguments_placeholder,
)
from xun.context.session_format import FORMAT_2_BYTES, NEWEST_READ, NEWEST_READ_MAX, NEWEST_TAIL_READ  # noqa: F401
