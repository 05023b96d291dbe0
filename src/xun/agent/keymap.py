"""What `ui.keymap` may say, checked without Textual (this layer may not import it): the app's binding ids
with their default keys and labels, and the key names Textual reports. tests/tui/test_keymap_table.py
holds the table against the TUI's bindings and the key names against Textual's, so they cannot drift."""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Mapping

BINDINGS: dict[str, tuple[str, str]] = {
    # id: (default keys, label). An id without a dot acts on the main screen; "NAME." ones in one dialog
    # or widget (the part before the dot).
    "help": ("f1", "Help"),
    "toggle_side": ("f4", "Panel"),
    "compact": ("f5", "Summarise"),
    "reclaim": ("f6", "Reclaim"),
    "preview": ("f7", "Preview"),
    "recoverable": ("f8", "Results"),
    "recall": ("f9", "Recall"),
    "cancel": ("escape", "Cancel"),
    "focus_prompt": ("escape", "Prompt"),
    "quit": ("ctrl+q", "Quit"),
    "quit_twice": ("ctrl+c", "Quit"),
    "chat_page_up": ("pageup", "Page up"),
    "chat_page_down": ("pagedown", "Page down"),
    "chat.previous_block": ("left_square_bracket", "Previous block"),
    "chat.next_block": ("right_square_bracket", "Next block"),
    "chat.toggle_block": ("enter,space", "Open/fold"),
    "chat.read_block": ("o", "Read whole"),
    "gauge.breakdown": ("enter", "Breakdown"),
    "config.close": ("escape,q", "Close"),
    "confirm.allow_once": ("y", "Allow once"),
    "confirm.allow_session": ("s", "Allow for this session"),
    "confirm.deny": ("n", "Deny"),
    "confirm.stop": ("escape", "Deny and stop the turn"),
    "consent.yes": ("y,f5", "Summarise now"),
    "consent.no": ("n,escape", "Not now"),
    "consent.off": ("o", "Off for this session"),
    "context.close": ("escape,q", "Close"),
    **{f"context.jump{n}": (str(n), f"Show message {n}") for n in range(1, 6)},
    "detail.close": ("escape,q", "Close"),
    "help.close": ("escape,f1,q", "Close"),
    "history.close": ("escape,q", "Close"),
    "inspector.close": ("escape", "Close"),
    "inspector.copy": ("c", "Copy"),
    "inspector.save": ("s", "Save to file"),
    "inspector.restore": ("r", "Restore into context"),
    "inspector.find": ("f", "Find in the history"),
    "inspector.chat": ("g", "Show in the chat"),
    "log.show_in_chat": ("g", "Show in the chat"),
    "mcp.close": ("escape,q", "Close"),
    "mcp.restart": ("r", "Restart"),
    "reader.close": ("escape,q", "Close"),
    "reader.copy": ("c", "Copy"),
    "preview.close": ("escape,q,f7", "Close"),
    "preview.compact": ("f5,s", "Summarise now"),
    "preview.reclaim": ("f6,r", "Reclaim now"),
    "recall.close": ("escape,f9", "Close"),
    "recall.restore": ("ctrl+r", "Restore into context"),
    "recall.scope": ("f2", "This session / all"),
    "recall.chat": ("ctrl+g", "Show in the chat"),
    "sessions.close": ("escape,q", "Close"),
    "trust.no": ("n,escape", "Do not trust"),
}

MODIFIERS = ("alt", "ctrl", "hyper", "meta", "shift", "super")
"""Textual names a key's modifiers in this (sorted) order: `ctrl+shift+up`, never `shift+ctrl+up`."""

NAMED_KEYS = frozenset(
    {
        "escape",
        "enter",
        "tab",
        "space",
        "backspace",
        "delete",
        "insert",
        "home",
        "end",
        "up",
        "down",
        "left",
        "right",
        "pageup",
        "pagedown",
        *(f"f{n}" for n in range(1, 25)),
    }
)
"""The keys without a character that Textual reports by these names (with or without modifiers)."""

_FRIENDLIER = {
    "solidus": "slash",
    "reverse_solidus": "backslash",
    "commercial_at": "at",
    "hyphen_minus": "minus",
    "plus_sign": "plus",
    "low_line": "underscore",
}
"""Textual's shorter names for some characters' Unicode names."""


def scope_of(binding_id: str) -> str:
    """Where a binding acts: "main screen" for an id without a dot, else its dialog or widget ("confirm")."""
    return binding_id.partition(".")[0] if "." in binding_id else "main screen"


def key_name_of(character: str) -> str:
    """The name Textual gives the key that types `character`: itself when a letter or digit, else its
    Unicode name in lower case with '_' for spaces and dashes ("[" -> "left_square_bracket")."""
    if character.isalnum():
        return character
    try:
        name = unicodedata.name(character).lower().replace("-", "_").replace(" ", "_")
    except ValueError:
        return {"\t": "tab"}.get(character, character)
    return _FRIENDLIER.get(name, name)


def _names_a_character(name: str) -> bool:
    """Whether Textual reports some printable character's key as `name` ("full_stop", "slash")."""
    unfriendly = {v: k for k, v in _FRIENDLIER.items()}.get(name, name)
    words = unfriendly.split("_")
    spellings = (
        [" ".join(words)]
        + [  # a dash in one place: "less_than_sign" is LESS-THAN SIGN
            " ".join([*words[:i], f"{words[i]}-{words[i + 1]}", *words[i + 2 :]]) for i in range(len(words) - 1)
        ]
    )
    for spelling in spellings:
        try:
            character = unicodedata.lookup(spelling.upper())
        except KeyError:
            continue
        if character.isprintable() and key_name_of(character) == name:
            return True
    return False


def normalise_keys(text: str) -> str:
    """`text` (comma-separated keys) as Textual names them: "Ctrl+Q" -> "ctrl+q", "shift+ctrl+up" ->
    "ctrl+shift+up", "[" -> "left_square_bracket". Raises ValueError saying what is wrong."""
    keys = []
    for key in text.split(","):
        key = key.strip()
        if not key:
            raise ValueError(f"an empty key in {text!r}; several keys are separated by single commas")
        *mods, base = key.split("+") if key != "+" else ["+"]
        if base == "" and key.endswith("+"):  # "ctrl++"
            mods, base = mods[:-1], "+"
        lowered = sorted(mod.strip().lower() for mod in mods)
        for mod in lowered:
            if mod not in MODIFIERS:
                raise ValueError(f"{key!r}: {mod!r} is not a modifier; the modifiers are {', '.join(MODIFIERS)}")
        if len(set(lowered)) != len(lowered):
            raise ValueError(f"{key!r}: a modifier given twice")
        base = base.strip()
        if len(base) == 1:
            if not base.isprintable():
                raise ValueError(f"{key!r}: not a key name")
            if mods:  # Textual reports ctrl+p whether Shift is held or not, never ctrl+P
                base = base.lower()
            base = key_name_of(base)
        elif base.lower() in NAMED_KEYS:
            base = base.lower()
        elif not _names_a_character(base.lower()):
            raise ValueError(
                f"{f'{key!r}: ' if mods else ''}{base!r} is not a key name Textual reports; use a character (a, 1, [), "
                "a function key (f1 to f24), escape, enter, tab, space, backspace, delete, insert, "
                "home, end, up, down, left, right, pageup or pagedown, with modifiers before it "
                "(ctrl+shift+up)"
            )
        else:
            base = base.lower()
        joined = "+".join([*lowered, base])
        keys.append({"ctrl+at": "ctrl+@"}.get(joined, joined))  # the one character Textual leaves unnamed
    return ",".join(keys)


def unknown_binding(binding_id: str) -> str:
    """What to say of an id that is not in `BINDINGS`: the nearest id, and all of them."""
    labels = {label.lower().replace(" ", "_"): ident for ident, (_, label) in BINDINGS.items() if "." not in ident}
    names = {**labels, **{ident: ident for ident in BINDINGS}}
    close = difflib.get_close_matches(binding_id.lower(), list(names), n=1, cutoff=0.75)
    hint = f"; did you mean {names[close[0]]}?" if close else ""
    main = ", ".join(ident for ident in BINDINGS if "." not in ident)
    dialogs = ", ".join(ident for ident in BINDINGS if "." in ident)
    return f"unknown binding id{hint} The ids are {main} (the main screen; F1 says what each does), and {dialogs}"


def clashes(keymap: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(errors, warnings) of a valid keymap: a key the keymap gives two actions of one screen (which one
    runs is then undefined: an error), and a key it takes from an action it leaves alone (that action has
    no key then, but stays in the Ctrl+P palette: a warning)."""
    errors: list[str] = []
    warnings: list[str] = []
    given: dict[tuple[str, str], str] = {}
    for ident, keys in keymap.items():
        for key in keys.split(","):
            other = given.setdefault((scope_of(ident), key), ident)
            if other != ident:
                errors.append(
                    f"{other} and {ident} are both given {key!r} ({scope_of(ident)}): only one of them "
                    "could run; give each its own key"
                )
    for ident, keys in keymap.items():
        own = BINDINGS[ident][0].split(",") if ident in BINDINGS else []
        for key in keys.split(","):
            if key in own:
                continue
            for other, (defaults, label) in BINDINGS.items():
                if (
                    other != ident
                    and other not in keymap
                    and scope_of(other) == scope_of(ident)
                    and key in defaults.split(",")
                ):
                    warnings.append(
                        f"ui.keymap.{ident} takes {key!r} from {other} ({label}), which has no key "
                        f"then (Ctrl+P still runs it; give it one with ui.keymap.{other})"
                    )
    return errors, warnings
