"""The config layer checks `ui.keymap` without Textual (`xun.agent.keymap`): its table of binding ids and its
key names are held here against the TUI's bindings and Textual's key names, so the two cannot drift."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from textual._ansi_sequences import ANSI_SEQUENCES_KEYS
from textual.binding import Binding
from textual.dom import DOMNode
from textual.keys import _character_to_key

import xun.tui
from xun.agent import keymap
from xun.tui.app import XunApp


def _bindings_of_the_tui() -> dict[str, tuple[type, Binding]]:
    found: dict[str, tuple[type, Binding]] = {}
    for info in pkgutil.walk_packages(xun.tui.__path__, "xun.tui."):
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and issubclass(cls, DOMNode) and cls.__module__ == module.__name__:
                for binding in cls.__dict__.get("BINDINGS", []):
                    if isinstance(binding, Binding) and binding.id:
                        assert binding.id not in found, f"two bindings with the id {binding.id}"
                        found[binding.id] = (cls, binding)
    return found


def test_the_table_is_every_binding_id_with_its_keys_and_label():
    tui = _bindings_of_the_tui()
    assert {ident: (b.key, b.description) for ident, (_, b) in tui.items()} == keymap.BINDINGS
    owners: dict[str, set[type]] = {}
    for ident, (cls, _) in tui.items():
        owners.setdefault(keymap.scope_of(ident), set()).add(cls)
    assert owners.pop("main screen") == {XunApp}
    assert all(len(classes) == 1 for classes in owners.values()), owners  # one scope, one set of bindings


def test_every_key_a_terminal_sends_is_a_key_name_the_config_takes_as_it_is():
    reported = {key.value for keys in ANSI_SEQUENCES_KEYS.values() if isinstance(keys, tuple) for key in keys}
    reported -= {"<scroll-up>", "<scroll-down>"}  # the wheel, not keys
    assert reported
    for key in sorted(reported):
        assert keymap.normalise_keys(key) == key


@pytest.mark.parametrize(
    "character", [chr(c) for c in [*range(0x21, 0x7F), *range(0xA1, 0x100)] if chr(c).isprintable()]
)
def test_a_character_is_named_as_textual_names_it(character):
    name = _character_to_key(character)
    assert keymap.key_name_of(character) == name
    if character != ",":  # it separates keys: the comma is written "comma"
        assert keymap.normalise_keys(character) == name
    assert keymap.normalise_keys(name) == name
