"""What the app says about the context's size after a compaction or a restore, as text (no Textual): the
main screen shows it (`MainScreen.compaction_recorded`). Each names only what would help with what is
there, and the keys as `ui.keymap` left them (`key_of`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xun.tui.format import counted, percent, tokens


def restored_over(agent: Any, mode: str) -> str | None:
    """A restore that took the context over the threshold: what the next call does about it (the user must
    not learn it from the next prompt reclaiming or summarising it again). None when it is under."""
    now, threshold = agent.request_tokens(), agent.threshold
    if now <= threshold:
        return None
    then = {
        "auto": "the next model call will compact it again (a reclaim or a summary)",
        "ask": "the next prompt will ask to summarise",
        "off": "automatic summaries are off, so it stays",
    }.get(mode, "")
    return f"The restore put the context over the threshold ({tokens(now)} / {tokens(threshold)}): {then}."


def summaries_off(agent: Any, config: Any, key_of: Callable[[str], str]) -> str:
    """The context is over the threshold and nothing compacts it because automatic summaries are off: the key
    that summarises, and how to turn them back on where they were turned off."""
    from xun.agent.config import CLI_SOURCE

    source = config.source_of("auto_compact.mode")
    if "this session only" in source:  # chosen in the app: it lasts until the app quits
        back = "/auto auto (or /auto ask); they are also back on when xun starts again"
    elif source == CLI_SOURCE:
        back = "/auto auto for this session, or start xun without `--set auto_compact.mode=off`"
    else:
        back = (
            f'/auto auto for this session, or set auto_compact.mode = "auto" or "ask" where it is set ({source}), '
            "e.g. `xun config set auto_compact.mode auto`"
        )
    now, threshold = agent.request_tokens(), agent.threshold
    return (
        f"the context is over the threshold ({tokens(now)} / {tokens(threshold)}, {percent(now, threshold)}%) "
        "and nothing compacts it: "
        f'automatic summaries are off (auto_compact.mode = "off", {source}). {key_of("compact")} summarises '
        f"now and {key_of('reclaim')} reclaims old tool results; to turn automatic summaries back on, {back}."
    )


def still_over(agent: Any, config: Any, kept: int, key_of: Callable[[str], str]) -> str | None:
    """A manual summary that left the context over the threshold: what is left, why, and only what would help
    with what is there (never F6 with no tool result to reclaim, nor /compact FOCUS when a single kept reply
    is the cause). None when it is under."""
    from xun.compact.breakdown import reclaim_preview
    from xun.context.messages import UserMessage, message_length

    now, threshold = agent.request_tokens(), agent.threshold
    if now <= threshold:
        return None
    conversation = agent.conversation
    messages = conversation.messages
    sizes = [round(message_length(msg) * conversation.tokens_per_char) for msg in messages[1:]]
    largest = max(sizes, default=0)
    why = (
        f"the {counted(kept, 'message')} it kept hold {tokens(sum(sizes))}, one of them {tokens(largest)}"
        if sizes
        else "what is left is the system prompt and the tools"
    )
    helps: list[str] = []
    reclaim = reclaim_preview(conversation, config.auto_compact.toolcall_keep_max)
    if reclaim.count:
        helps.append(f"{key_of('reclaim')} reclaims {reclaim.what} (about {tokens(reclaim.tokens_saved)})")
    if sizes and now - largest <= threshold:  # that one message alone keeps it over
        index = sizes.index(largest) + 1
        big = messages[index]
        last_prompt = max((i for i, msg in enumerate(messages) if isinstance(msg, UserMessage)), default=0)
        role = "prompt" if isinstance(big, UserMessage) else getattr(big, "role", "message")
        if index == last_prompt:
            what, remedy = "the last prompt", "/revise takes it back into the input to shorten it"
        elif index > last_prompt and role == "assistant":
            what, remedy = (
                "the last reply",
                "/retry asks for it again and /revise takes its prompt back to edit (both drop it)",
            )
        elif role == "tool":
            what, remedy = (
                f"tool result #{index}",
                f"{key_of('reclaim')} reclaims it with a smaller "
                "auto_compact.toolcall_keep_max (it keeps the newest results)",
            )
        else:
            what, remedy = f"message #{index} ({role})", "/clear starts over (the compaction log stays)"
        why += f"; without {what} ({tokens(largest)}) it would be under"
        helps.append(remedy)
    elif sizes:
        helps.append("a smaller auto_compact.summary_keep_max keeps fewer messages")
    helps.append("/context shows what fills it")
    return (
        f"after the summary the context is still over the threshold: {tokens(now)} / {tokens(threshold)} "
        f"({percent(now, threshold)}%): {why}. What helps: {'; '.join(helps)}."
    )
