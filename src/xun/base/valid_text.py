"""Text that can always be saved: no lone surrogates.

Python strings can hold code points that UTF-8 cannot encode: a file name with an undecodable byte comes
back from the OS as `\\udcff` (surrogateescape), and a JSON string from a server may carry half of a pair
(`"\\ud83d"`). One such character in a message made every save of the session fail. `valid_text` is
applied where text enters the conversation (`Conversation.add_*`) and where tool output is made
(`Toolbox.call`), so everything downstream (sessions, the offload log, the recall index, the screen)
gets valid text: an escaped byte becomes the visible `\\xff`, a lone half becomes U+FFFD, a split pair
is joined.

`escape_control` is for showing text from outside (a file, a server, a model, a config key) on a terminal:
every control character becomes visible the same way (`\\x1b`, `\\r`, `\\u202e`), so no escape sequence
(a clipboard write, a title change, a screen clear) reaches the terminal and nothing is hidden.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["escape_control", "escape_control_json", "valid_text", "valid_values"]

_SURROGATES = re.compile(r"[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")


def _fix(match: re.Match[str]) -> str:
    found = match.group()
    if len(found) == 2:
        return found.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    code = ord(found)
    if 0xDC80 <= code <= 0xDCFF:  # a byte the OS could not decode (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return "\ufffd"


def valid_text(text: str) -> str:
    """`text` with every surrogate code point made valid (see the module); the same object when clean."""
    if text.isascii():
        return text
    return _SURROGATES.sub(_fix, text) if _SURROGATES.search(text) else text


def valid_values(value: Any) -> Any:
    """`valid_text` applied to every string in nested dicts and lists (a reply with its tool calls)."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_values(k): valid_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_values(item) for item in value]
    return value


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x0D:
        return "\\r"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_control(text: str, *, keep_newlines: bool = True) -> str:
    """Control characters made visible (`\\x1b`, `\\r`, bidi overrides...) so a screen shows what is real
    and a terminal runs none of it; newlines and tabs stay unless `keep_newlines` is false."""
    out = _CONTROL.sub(_visible, text) if _CONTROL.search(text) else text
    if not keep_newlines:
        out = out.replace("\n", "\\n").replace("\t", "\\t")
    return out


def escape_control_json(document: str) -> str:
    """A JSON text with the control characters JSON leaves raw (DEL, C1, separators, bidi overrides) written as
    `\\u009b` escapes: the same document for a program, nothing a terminal would act on."""
    return _CONTROL.sub(lambda match: f"\\u{ord(match.group()):04x}", document)
