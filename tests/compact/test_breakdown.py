"""What fills the context (`xun.compact.breakdown`): the parts add up to the conversation's own
estimate, each kind lands in its part, and a reclaim preview names exactly what a reclaim replaces."""

from __future__ import annotations

from xun.compact.breakdown import context_breakdown, reclaim_preview
from xun.context.conversation import Conversation
from xun.context.messages import COMPACTED_SYSTEM_PROMPT

from context.builders import assistant_call, fresh_length, long_conversation, tool_round


def kinds(breakdown) -> dict[str, int]:
    return {(p.name or p.kind): p.chars for p in breakdown.parts}


def small_conversation() -> Conversation:
    c = Conversation()
    c.set_system_message_content("You are careful.")  # 16 characters
    c.set_persistent_section("AGENTS.md", "Run the tests before committing.")  # 32
    c.add_user_message("read the file please")  # 20
    assistant_call(c, ("call_1", "read_file", {"path": "a.py"}), content="Reading it.")  # 11 + arguments
    c.add_tool_result("call_1", "print('hello')\n" * 20)  # 300
    c.add_agent_message({"role": "assistant", "content": "It prints hello twenty times."})  # 29
    return c


def test_every_kind_lands_in_its_part_and_the_parts_add_up():
    c = small_conversation()
    b = context_breakdown(c, threshold=1000, window=4000)
    arguments = len('{"path": "a.py"}')
    assert kinds(b) == {
        "system": 16 + 2,  # the role prompt and the blank line before the sections
        "AGENTS.md": 32,
        "user": 20,
        "assistant": 11 + 29,
        "tool_calls": arguments,
        "tool_results": 300,
    }
    assert b.chars == c.estimated_message_length() == fresh_length(c)
    assert sum(p.chars for p in b.parts) == b.chars
    section = b.part("section", "AGENTS.md")
    assert section is not None and section.label == "AGENTS.md (persistent)"
    assert b.part("assistant").count == 2 and b.part("tool_calls").count == 1
    assert b.messages == len(c.messages)


def test_tokens_are_characters_times_the_calibrated_ratio():
    c = small_conversation()
    from xun.context.conversation import MESSAGE_TOKENS

    # the server counted half a token a character, besides each message's framing (which the ratio leaves out)
    c.record_usage(c.estimated_message_length() // 2 + MESSAGE_TOKENS * len(c.messages))
    b = context_breakdown(c, threshold=1000)
    assert b.tokens_per_char == c.tokens_per_char == 0.5
    for part in b.parts:
        assert part.tokens == round(part.chars * 0.5)
    assert b.estimated_tokens == round(b.chars * 0.5)
    assert b.reported_tokens == c.total_tokens
    assert b.live_estimate == c.estimated_tokens()


def test_free_space_to_the_threshold_and_to_the_window():
    c = small_conversation()
    b = context_breakdown(c, threshold=1000, window=4000)
    used = b.used
    assert b.free.to_threshold == 1000 - used
    assert b.free.to_window == 3000
    assert context_breakdown(c, threshold=1000).free.to_window is None
    over = context_breakdown(c, threshold=50, window=200)
    assert over.free.to_threshold == 0 and over.free.to_window == 200 - over.used


def test_a_summary_and_reclaimed_placeholders_have_their_own_parts():
    c = long_conversation(rounds=8)
    c.reclaim_tool_results(keep_max=2)
    c.set_system_message_content("what happened so far", is_compressed=True)
    b = context_breakdown(c, threshold=10_000)
    assert b.part("summary").chars == len(COMPACTED_SYSTEM_PROMPT.format(summary="what happened so far"))
    assert b.part("system").chars == len("You are a careful assistant.") + 2
    placeholders, kept = b.part("placeholders"), b.part("tool_results")
    assert placeholders.count == 6 and kept.count == 2
    assert kept.chars == 2 * len("contents of file 0\n" + "x" * 400)
    assert sum(p.chars for p in b.parts) == c.estimated_message_length()


def test_the_five_largest_messages_point_into_the_conversation():
    c = Conversation()
    c.add_user_message("short")
    for i, size in enumerate((100, 900, 300, 700, 500, 50)):
        tool_round(c, i, size=size)
    c.add_user_message("u" * 600)
    b = context_breakdown(c, threshold=10_000)
    assert len(b.largest) == 5
    assert [m.chars for m in b.largest] == sorted((m.chars for m in b.largest), reverse=True)
    first = b.largest[0]
    assert first.role == "tool" and first.tool == "read_file" and first.tool_call_id == "call_1"
    assert c.messages[first.index].raw["tool_call_id"] == "call_1"
    assert first.preview.startswith("contents of file 1 xxx") and len(first.preview) <= 120
    user = next(m for m in b.largest if m.role == "user")
    assert c.messages[user.index].text == "u" * 600
    assert context_breakdown(c, threshold=1, largest=2).largest == b.largest[:2]


def test_an_assistant_message_that_only_calls_tools_says_which():
    c = Conversation()
    assistant_call(c, ("call_9", "run_command", {"command": "make " + "x" * 300}))
    b = context_breakdown(c, threshold=100)
    (only,) = b.largest
    assert only.role == "assistant" and only.tool == "run_command" and only.tool_call_id == "call_9"
    assert only.preview.startswith("calls run_command {")
    assert b.part("tool_calls").chars == c.estimated_message_length()
    assert b.part("assistant").chars == 0 and b.part("assistant").count == 1, "one message, no text of its own"


def test_an_empty_conversation():
    b = context_breakdown(Conversation(), threshold=100, window=200)
    assert b.parts == [] and b.largest == [] and b.chars == 0
    assert b.free.to_threshold == 100 and b.free.to_window == 100


# --------------------------------------------------------------------------------------- reclaim preview


def test_the_reclaim_preview_names_what_a_reclaim_replaces_and_changes_nothing():
    c = long_conversation(rounds=10)
    c.add_tool_result("call_short", "ok")  # shorter than its placeholder: never replaced
    length, edits = c.estimated_message_length(), c.messages.edits
    preview = reclaim_preview(c, keep_max=3)
    assert c.estimated_message_length() == length and c.messages.edits == edits
    result = c.reclaim_tool_results(keep_max=3)
    assert preview.ids == result.reclaimed_ids and preview.count == result.reclaimed_count == 8
    assert preview.chars_saved == result.length_before - result.length_after
    assert preview.tokens_saved == round(preview.chars_saved * c.tokens_per_char)
    assert preview.tool_results == 11
    assert reclaim_preview(c, keep_max=3).count == 0, "placeholders are not replaced again"


def test_the_reclaim_preview_skips_restored_results_and_short_histories():
    c = long_conversation(rounds=6)
    assert reclaim_preview(c, keep_max=6).count == 0
    assert reclaim_preview(c, keep_max=12).count == 0
    c.reclaim_tool_results(keep_max=2)
    c.restore_tool_result("call_0")
    preview = reclaim_preview(c, keep_max=2)
    assert "call_0" not in preview.ids
    assert preview.ids == c.reclaim_tool_results(keep_max=2).reclaimed_ids
    everything = reclaim_preview(long_conversation(rounds=4), keep_max=0)
    assert everything.count == 4


def test_the_request_overhead_is_a_part_of_its_own():
    c = small_conversation()
    c.overhead_chars = 400  # the tool schemas, as the engine measures them at a report
    b = context_breakdown(c, threshold=1000)
    assert b.parts[0].kind == "overhead" and b.parts[0].chars == 400
    assert b.parts[0].label == "tool definitions (every request)"
    assert b.chars == c.estimated_message_length() + 400 == sum(p.chars for p in b.parts)


def test_tool_definitions_cost_what_the_server_measured():
    """llama-server's SmolLM2 template ignores tool definitions: calibrated, their part is the measured
    fixed cost (here 25 tokens for 4,959 characters), not their characters times the ratio (1.3k)."""
    c = small_conversation()
    c.calibrate(0.25, 25)
    b = context_breakdown(c, threshold=1000, tool_definitions={"": 4959})
    tools = b.part("overhead")
    assert tools is not None and tools.chars == 4959 and tools.tokens == 25
    assert b.chars == c.estimated_message_length() and b.fixed_tokens == 25
    assert b.estimated_tokens == round(b.chars * 0.25) + 25
