"""The conversation: it owns the typed messages, their length estimates and everything compaction took
out of them, and runs the two compaction tiers and persistence over them.

Tier 1 (`reclaim_tool_results`) swaps old tool results, and the large arguments of their calls, for
placeholders and keeps the originals (`xun.context.reclaim`);
tier 2 (`plan_compaction` + `apply_compaction`, or `compact`/`acompact`) replaces older turns with a
summary (`xun.context.summarise` chooses the cut), after appending their originals to the offload log.
Nothing is ever dropped: every text is in the messages, the reclaimed originals, the offload log or (when
the log cannot be written) the session's kept originals. The session file's format is
`xun.context.session_format`'s.

With a search index attached (`recall_index`), every step that changes what is history queues the
matching index write (`xun.context.index_writes`). The synchronous API writes it inline, in the same call;
the async one (`areclaim_tool_results`, `aapply_compaction`, `acompact`, `arestore_tool_result`), which the agent
uses, changes the conversation on the event loop and then writes the index in a worker thread, so a first
reclaim of thousands of results does not freeze a front end running on the same loop.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import mimetypes
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from xun.base.atomic import write_text_atomic
from xun.base.valid_text import valid_text, valid_values
from xun.context.compaction_results import CompactionCounter, SummaryCompactResult, ToolCallCompactResult
from xun.context.index_writes import IndexWrite, IndexWrites
from xun.context.message_list import MessageList
from xun.context.messages import Message, RawOpenAIMessage, SystemPrompt, UserMessage, content_text
from xun.context.offload import append_offload, archive_ids, utc_now_iso
from xun.context.prompt_cache import PromptCacheRecord
from xun.context.reclaim import pinnable, reclaim, reclaimed_in_context, restore
from xun.context.archive_store import SessionFile
from xun.context.reclaimed import ReclaimedArchive
from xun.context.session_format import answer_unanswered_calls, parse_session_file, parse_session_text, session_chunks
from xun.context.summarise import (
    DEFAULT_LEDGER_CHARS,
    last_user_index,
    plan_summary,
    system_prompt,
    turn_in_progress,
    turn_prompt_index,
)

# Used here, and importable from here as before their modules were split out (`x as x` re-exports).
from xun.context.estimates import TOKENS_PER_CHAR_RANGE as TOKENS_PER_CHAR_RANGE
from xun.context.estimates import MESSAGE_TOKENS as MESSAGE_TOKENS
from xun.context.estimates import DEFAULT_TOKENS_PER_CHAR as DEFAULT_TOKENS_PER_CHAR
from xun.context.reclaim import PLACEHOLDER as PLACEHOLDER
from xun.context.session_format import FORMAT_2_OPENING as FORMAT_2_OPENING
from xun.context.session_format import FORMAT_VERSION as FORMAT_VERSION
from xun.context.session_format import UNANSWERED_AT_LOAD as UNANSWERED_AT_LOAD
from xun.context.session_format import is_session_id as is_session_id
from xun.context.session_format import newest_messages as newest_messages
from xun.context.session_format import read_newest_messages as read_newest_messages
from xun.context.session_format import read_session as read_session
from xun.context.session_format import session_head as session_head
from xun.context.summarise import CompactionPlan as CompactionPlan
from xun.context.summarise import StalePlanError as StalePlanError
from xun.context.summarise import SummarizationEvent as SummarizationEvent
from xun.base.errors import SessionFormatError as SessionFormatError
from xun.context.index_writes import RecallListener as RecallListener

TRUNCATE_AT = 1000


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def image_to_url(image: Any) -> str:
    """Normalise an image to a URL: data: and http(s) URLs pass, files and PIL images become data URLs."""
    if isinstance(image, str) and image.startswith(("data:", "http://", "https://")):
        return image
    if isinstance(image, (str, os.PathLike)):
        path = Path(image)
        if not path.is_file():
            raise ValueError(f"image {str(image)!r} is neither a URL nor a readable file")
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if not mime.startswith("image/"):
            raise ValueError(f"{path} does not look like an image (type {mime})")
        return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"
    if hasattr(image, "save"):  # a PIL image, without importing PIL
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return f"data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"
    raise ValueError(f"unsupported image of type {type(image).__name__}")


def tool_result_text(content: Any) -> str:
    """The text stored for a tool result: `value_str()` when it has one, strings as they are, else JSON."""
    try:
        if isinstance(content, str):
            return content
        value_str = getattr(content, "value_str", None)
        if callable(value_str):
            text = value_str()
            if not isinstance(text, str):
                raise TypeError(f"value_str() returned {type(text).__name__}, not str")
            return text
        return json.dumps(content, ensure_ascii=False)
    except Exception as exc:  # any failure to turn the result into text is stored, not raised
        return f"[Error] Failed to serialize tool result: {exc}"


class Conversation:
    """The messages sent to the model, and everything compaction took out of them."""

    def __init__(
        self,
        conversation_id: str | None = None,
        offload_dir: str | os.PathLike[str] | None = None,
        recall_index: RecallListener | None = None,
    ) -> None:
        self._messages = MessageList()
        self.conversation_id: str = conversation_id or uuid.uuid4().hex
        self.total_tokens: int | None = None
        """`usage.total_tokens` of the last model response: the only trigger of auto-compaction."""
        self.usage_chars: int | None = None
        """The estimated length when `total_tokens` was reported, to estimate what was added since."""
        self.tokens_per_char = DEFAULT_TOKENS_PER_CHAR
        """Reported tokens per estimated character, from the last report (calibrates estimates)."""
        self.overhead_chars = 0
        """Characters a request carries besides the messages (tool schemas), at the last report."""
        self.usage_messages = 0
        """How many messages there were when `total_tokens` was reported."""
        self.fixed_tokens: int | None = None
        """Tokens a request costs beyond its messages' characters and their framing (tool definitions as
        the server renders them, the reply's opening), measured by `calibrate`; None: not measured."""
        self.counted: tuple[int, int, int] | None = None
        """The server tokenizer's count of the next request as the conversation stood before a call
        (tokens, estimated characters, messages), newer than the last report: the estimate extends it."""
        self.compaction_counter = CompactionCounter()
        self.prompt_cache = PromptCacheRecord()
        """What the server served from its prompt cache: the last call's figures and the totals."""
        self.offload_dir: Path | None = Path(offload_dir) if offload_dir is not None else None
        """Where summaries append the originals (`<id>.md`); None keeps them in the session instead."""
        self.recall_index: RecallListener | None = recall_index
        """The search index (`xun.context.recall`) that offloads and reclaims are also written to; None (a bare
        conversation) touches no disk for it. `SessionStore.new()`/`load()` attach the store's index."""
        self.recall_warnings: list[str] = []
        """Index problems met by reclaims, restores and clears, for the front end (`take_recall_warnings`);
        a summary's own index problem is its result's `warning`."""
        self._index_writes = IndexWrites()
        self.created_at: float = time.time()
        self.title: str | None = None
        """What `/sessions` and `xun sessions` call it: set with /name, else the first prompt (kept at save)."""
        self.draft = ""
        """What the app's prompt held, not sent, when it quit (and the prompts queued behind a turn): a
        resume puts it back in the input. Never part of the context."""
        self.usage_totals: dict[str, int] = {}
        """The session's model usage as the server reported it ("calls", "prompt", "completion", and
        "cached_input" once known): kept with the session, across resumes."""
        self.summarizations: list[SummarizationEvent] = []
        self.compaction_log: list[dict[str, Any]] = []
        """Compaction events as JSON records, written by the agent and shown by front ends."""
        self.kept_originals: list[dict[str, Any]] = []
        """Summarised originals not offloaded to a log: {"time", "reason", "messages": [Message...]}."""
        self._reclaimed = ReclaimedArchive()
        self._pinned: set[str] = set()
        self._reclaim_frontier = 0
        self.ledger_max_chars = DEFAULT_LEDGER_CHARS
        """The turn ledger's bound (`xun.context.ledger`); the agent sets it from the threshold."""

    # ----------------------------------------------------------------- messages

    @property
    def messages(self) -> MessageList:
        """A mutable list of message objects; append to it freely, every figure stays right."""
        return self._messages

    @messages.setter
    def messages(self, value: Sequence[Message]) -> None:
        self._messages = value if isinstance(value, MessageList) else MessageList(value)
        self._reclaim_frontier = 0

    def completion_params(self) -> list[dict[str, Any]]:
        """The whole conversation as the list of message params sent to the model."""
        return [m.completion_param() for m in self._messages]

    def _system(self) -> SystemPrompt | None:
        return system_prompt(self._messages)

    def set_system_message_content(self, content: str, is_compressed: bool = False) -> None:
        """Replace or insert message 0, keeping its persistent sections.

        A role prompt (`is_compressed=False`) set after a summary replaces the role prompt and keeps
        the summary; a summary (`is_compressed=True`) keeps the role prompt in `base_prompt`.
        """
        current = self._system()
        sections = dict(current.persist_sections) if current else {}
        if current is None:
            prompt = SystemPrompt(content=content, is_compressed=is_compressed)
            self._messages.insert(0, prompt)
            return
        if is_compressed:
            base = current.base_prompt if current.is_summary else current.content
            prompt = SystemPrompt(content=content, is_compressed=True, persist_sections=sections, base_prompt=base)
        elif current.is_summary:
            prompt = SystemPrompt(
                content=current.content,
                is_compressed=True,
                persist_sections=sections,
                base_prompt=content,
                ledger=current.ledger,
            )
        else:
            prompt = SystemPrompt(content=content, persist_sections=sections)
        self._messages[0] = prompt

    def set_persistent_section(self, name: str, content: str) -> None:
        """Write a section kept across compaction (AGENTS.md lives here); empty content deletes it."""
        current = self._system()
        if current is None:
            if not content:
                return
            self._messages.insert(0, SystemPrompt(content="", persist_sections={name: content}))
            return
        sections = dict(current.persist_sections)
        if content:
            sections[name] = content
        elif sections.pop(name, None) is None:
            return
        self._messages[0] = SystemPrompt(
            content=current.content,
            is_compressed=current.is_summary,
            persist_sections=sections,
            base_prompt=current.base_prompt,
            ledger=current.ledger,
        )

    def add_user_message(self, content: str, images: Sequence[Any] | None = None) -> None:
        urls = [image_to_url(image) for image in images] if images else []
        self._messages.append(UserMessage(text=valid_text(content), images=urls))

    def set_response_schema(self, schema: Any) -> None:
        """Ask for the last user message to be answered as JSON matching a pydantic model (or a schema dict)."""
        last = self._messages[-1] if self._messages else None
        if not isinstance(last, UserMessage):
            raise ValueError("set_response_schema needs the last message to be a user message")
        schema_dict = schema if isinstance(schema, dict) else schema.model_json_schema()
        self._messages[-1] = UserMessage(
            text=last.text, images=list(last.images), response_schema=json.dumps(schema_dict)
        )

    def add_agent_message(self, message: Any) -> None:
        """Append an assistant reply (an openai `ChatCompletionMessage` or a dict), minus an empty `tool_calls`."""
        if isinstance(message, dict):
            raw = dict(message)
        else:
            raw = message.model_dump(exclude_none=True)
        raw.setdefault("role", "assistant")
        raw.setdefault("content", None)
        if raw.get("tool_calls") == []:
            del raw["tool_calls"]
        self._messages.append(RawOpenAIMessage(raw=valid_values(raw)))

    def add_tool_result(self, tool_call_id: str, content: Any) -> None:
        """Append a `role="tool"` message linked to its call by `tool_call_id`."""
        text = content if type(content) is str else tool_result_text(content)
        self._messages.append(
            RawOpenAIMessage(
                raw={"role": "tool", "tool_call_id": valid_text(tool_call_id), "content": valid_text(text)}
            )
        )

    def pop_last_message_if_user(self) -> UserMessage | None:
        """On cancel: take back the unanswered user message, if it is the last one."""
        if self._messages and isinstance(self._messages[-1], UserMessage):
            return self._messages.pop()  # type: ignore[return-value]
        return None

    def turn_prompt_index(self) -> int:
        """The turn's prompt: the last user message the agent did not write itself (`is_synthetic`)."""
        return turn_prompt_index(self._messages)

    def pop_from_last_user_message(self, inclusive: bool = True) -> list[Message]:
        """Pop what follows the last user message (`/retry`), and the message too when `inclusive` (`/revise`)."""
        index = last_user_index(self._messages)
        if index < 0:
            return []
        start = index if inclusive else index + 1
        popped = list(self._messages[start:])
        del self._messages[start:]
        return popped

    def offload_taken_back(self, messages: list[Message]) -> tuple[str | None, str | None]:
        """Messages `/revise` or `/retry` took out of the context go to the offload log, as /clear's do, so
        F9 and `xun history` still find them, even a prompt taken back to revise and then not sent. Returns (the log's
        path or None, a warning or None)."""
        leaving = [m for m in messages if m.role != "system"]
        if not leaving:
            return None, None
        offload_path, warning, _job, _when = self._offload(leaving, write_index=True)
        return offload_path, warning

    def clear(self) -> tuple[int, str | None, str | None]:
        """Empty all but the system message; reset tokens, counters and reclaimed originals.

        What leaves goes to the offload log first (with the reclaimed originals in place of their
        placeholders), as a summary's originals do, so recall and `xun history` still find it; when the
        log cannot be written it is kept in the session file. The offload log, the compaction log and any
        kept originals stay: they are history, not context. Returns (messages offloaded, the log's path
        or None, a warning or None).
        """
        count, offload_path, warning, job = self._clear()
        self.write_recall_index()
        return count, offload_path, warning or (job.warning if job is not None else None)

    async def aclear(self) -> tuple[int, str | None, str | None]:
        """`clear` for the event loop: the log is written at once, the index in a worker thread."""
        count, offload_path, warning, job = self._clear()
        await self.awrite_recall_index()
        return count, offload_path, warning or (job.warning if job is not None else None)

    def _clear(self) -> tuple[int, str | None, str | None, IndexWrite | None]:
        """`clear` with its index writes only queued; the offload's index write is returned with the rest."""
        leaving = [m for m in self._messages if m.role != "system"]
        offload_path, warning, job = None, None, None
        if leaving:
            offload_path, warning, job, _when = self._offload(leaving, write_index=False)
        system = self._system()
        if system is not None and system.is_summary:  # a fresh start keeps the role and the rules, not the summary
            system = SystemPrompt(content=system.base_prompt, persist_sections=dict(system.persist_sections))
        self.messages = [system] if system and (system.content or system.persist_sections) else []  # no empty one
        self.total_tokens = None
        self.usage_chars = None
        self.counted = None
        self.overhead_chars = 0
        self.compaction_counter = CompactionCounter()
        if self.recall_index is not None and len(self._reclaimed):
            index, session = self.recall_index, self.conversation_id
            self._queue_index_write(lambda: index.forget_reclaimed(session), self._recall_warning)
        self._reclaimed.clear()
        self._pinned.clear()
        return len(leaving), offload_path, warning, job

    # --------------------------------------------------------------- measures

    def estimated_message_length(self) -> int:
        """Characters of content, text, reasoning and tool-call arguments, kept incrementally."""
        return self._messages.estimated_length()

    def record_usage(self, total_tokens: int, overhead_chars: int = 0) -> None:
        """Take the server's `usage.total_tokens` for the conversation as it stands now.

        `overhead_chars` is what the request carried besides the messages (the tool schemas): counting
        it keeps the tokens-per-character ratio true early in a session, when the schemas dominate.
        """
        self.total_tokens = total_tokens
        self.counted = None
        chars = self.estimated_message_length()
        self.usage_chars = chars
        self.usage_messages = len(self._messages)
        self.overhead_chars = overhead_chars
        if self.fixed_tokens is not None:
            return  # calibrated: the ratio is the tokenizer's, corrected by each reply's prompt count (the agent's)
        if chars + overhead_chars > 0:
            low, high = TOKENS_PER_CHAR_RANGE
            framing = MESSAGE_TOKENS * len(self._messages)  # counted apart by `estimated_tokens`, so not in the ratio
            self.tokens_per_char = min(max(max(total_tokens - framing, 1) / (chars + overhead_chars), low), high)

    def calibrate(self, tokens_per_char: float, fixed_tokens: int) -> None:
        """Take a measure of the server's tokenizer (`xun.agent.window`): tokens per character of message text,
        and what a request costs besides its messages and their framing (tool definitions, the reply's
        opening)."""
        low, high = TOKENS_PER_CHAR_RANGE
        self.tokens_per_char = min(max(tokens_per_char, low), high)
        self.fixed_tokens = fixed_tokens

    def record_count(self, tokens: int) -> None:
        """Take the server tokenizer's count of the next request as the conversation stands now (counted
        before a call, `xun.agent.window.count_request`): the estimate extends it until the reply's report."""
        self.counted = (tokens, self.estimated_message_length(), len(self._messages))

    def estimated_tokens(self) -> int:
        """Tokens of the next request now: the last count (or reported total) plus what was added (or
        removed) since, calibrated; with neither since the last summary, the estimated length times the
        ratio plus each message's framing and the request's fixed cost (measured by `calibrate`, else the
        tool definitions' characters times the ratio)."""
        chars = self.estimated_message_length()
        framing = MESSAGE_TOKENS * len(self._messages)
        base = self.counted
        if base is None and self.total_tokens is not None and self.usage_chars is not None:
            base = (self.total_tokens, self.usage_chars, self.usage_messages)
        if base is not None:
            tokens, then_chars, then_messages = base
            added = (chars - then_chars) * self.tokens_per_char + MESSAGE_TOKENS * (len(self._messages) - then_messages)
            return max(0, round(tokens + added))
        if self.fixed_tokens is not None:
            return max(0, round(chars * self.tokens_per_char) + framing + self.fixed_tokens)
        return round((chars + self.overhead_chars) * self.tokens_per_char) + framing

    @staticmethod
    def content_to_text(content: Any, truncate: bool = False) -> str:
        text = content_text(content)
        if truncate and len(text) > TRUNCATE_AT:
            return text[:TRUNCATE_AT] + "…(truncated)"
        return text

    def to_history(self, truncate: bool = False) -> list[dict[str, str]]:
        """`{role, content}` records of what the model sees, for the UI. `truncate` cuts each message but
        the system one, which is always whole: it holds the summary (its pending_tasks are what a user
        checks after a compaction), the turn ledger and AGENTS.md."""
        return [
            {
                "role": m.role,
                "content": self.content_to_text(
                    m.completion_param().get("content"), truncate and not isinstance(m, SystemPrompt)
                ),
            }
            for m in self._messages
        ]

    # ------------------------------------------------------------------ tier 1

    @property
    def reclaimed_results(self) -> ReclaimedArchive:
        """Reclaimed tool results by tool call id, oldest first: a read-only mapping of their metadata."""
        return self._reclaimed

    def reclaimed_original(self, toolcall_id: str) -> str | None:
        """The original of a reclaimed tool result, or None if that id was never reclaimed."""
        return self._reclaimed.original(toolcall_id)

    # The seed's names for tier 1, kept for code written against its API.
    compacted_toolcalls = reclaimed_results
    compacted_toolcall_result = reclaimed_original

    def reclaim_tool_results(self, keep_max: int = 12, *, write_index: bool = True) -> ToolCallCompactResult:
        """Tier 1: replace all but the newest `keep_max` tool results with recoverable placeholders, and the
        large arguments of their calls too.

        A result is replaced only when the placeholder is shorter. A call whose result is replaced by this
        rule's position (older than the newest `keep_max`; whether or not the result itself was long enough
        to replace) has its arguments replaced when they are longer than ARGUMENTS_RECLAIM_AT characters,
        by `arguments_placeholder` (valid JSON, its short fields kept), the original archived under
        `arguments_id(call_id)`; never the calls of the round at work. Results and arguments restored with
        `restore_tool_result` stay until they leave the conversation. Repeat calls reclaim nothing new
        but still count a tool round, and cost in proportion to what changed since the last call.
        With `write_index=False` the index write is only queued (`areclaim_tool_results` runs it in a thread).
        """
        if keep_max < 0:
            raise ValueError("keep_max must be >= 0")
        self.compaction_counter.tool_rounds += 1
        messages = self._messages
        before = messages.estimated_length()
        index = self.recall_index
        done = reclaim(
            messages, self._reclaimed, self._pinned, self._reclaim_frontier, keep_max, collect=index is not None
        )
        self._reclaim_frontier = done.frontier
        reclaimed, arguments_count, indexed = done.reclaimed, done.arguments_count, done.indexed
        if indexed and index is not None:  # a failure is a warning: the originals stay in the archive
            session = self.conversation_id
            self._queue_index_write(lambda: index.index_reclaimed(session, indexed), self._recall_warning)
        if write_index:
            self.write_recall_index()
        after = messages.estimated_length()
        return ToolCallCompactResult(
            reclaimed_count=len(reclaimed),
            reclaimed_fraction=(before - after) / before if before else 0.0,
            reclaimed_ids=tuple(reclaimed),
            length_before=before,
            length_after=after,
            arguments_count=arguments_count,
        )

    compact_toolcall = reclaim_tool_results  # the seed's name

    async def areclaim_tool_results(self, keep_max: int = 12) -> ToolCallCompactResult:
        """`reclaim_tool_results` for the event loop: the placeholders go in at once, the index is written in
        a worker thread; its warnings are in `recall_warnings` when this returns."""
        result = self.reclaim_tool_results(keep_max, write_index=False)
        await self.awrite_recall_index()
        return result

    def _recall_warning(self, warning: str | None) -> None:
        if warning:
            self.recall_warnings.append(warning)

    # ------------------------------------------------------------ the search index

    def _queue_index_write(
        self, write: Callable[[], str | None], settle: Callable[[str | None], None] | None
    ) -> IndexWrite:
        return self._index_writes.add(write, settle)

    def write_recall_index(self) -> None:
        """Run the queued index writes here and now (the synchronous API does, inline)."""
        self._index_writes.run_here()

    async def awrite_recall_index(self) -> None:
        """Run the queued index writes in a worker thread: SQLite's work stays off the event loop, and
        the conversation is not touched there (the writes only use what they were queued with)."""
        await self._index_writes.run_in_thread()

    def take_recall_warnings(self) -> list[str]:
        """The index warnings not shown yet (and forget them)."""
        taken, self.recall_warnings = self.recall_warnings, []
        return taken

    def restore_tool_result(self, toolcall_id: str, *, write_index: bool = True) -> None:
        """Put a reclaimed original (a result, or a call's arguments) back in place of its placeholder, and
        keep it there.

        Raises KeyError for an id that was never reclaimed, ValueError when its message has since
        left the conversation in a summary (the original stays readable by id). With `write_index=False`
        the index write is only queued (`arestore_tool_result` runs it in a thread).
        """
        restore(self._messages, self._reclaimed, self._pinned, toolcall_id)
        if self.recall_index is not None:
            index, session = self.recall_index, self.conversation_id
            self._queue_index_write(lambda: index.forget_reclaimed(session, [toolcall_id]), self._recall_warning)
        if write_index:
            self.write_recall_index()

    def reclaimed_in_context(self) -> set[str]:
        """The archive ids whose placeholder is still in the conversation (restorable); the others were
        summarised away after they were reclaimed (still readable by id)."""
        return reclaimed_in_context(self._messages, self._reclaimed)

    async def arestore_tool_result(self, toolcall_id: str) -> None:
        """`restore_tool_result` for the event loop: the index write runs in a worker thread."""
        self.restore_tool_result(toolcall_id, write_index=False)
        await self.awrite_recall_index()

    # ------------------------------------------------------------------ tier 2

    def plan_compaction(self, keep_recent: int) -> CompactionPlan:
        """Choose the cut for a summary keeping about `keep_recent` recent messages, changing nothing
        (`xun.context.summarise.plan_summary` says how)."""
        where = str(self.offload_dir / f"{self.conversation_id}.md") if self.offload_dir is not None else None
        return plan_summary(
            self._messages,
            keep_recent,
            tokens_per_char=self.tokens_per_char,
            archive=self._reclaimed,
            ledger_where=where,
            ledger_max_chars=self.ledger_max_chars,
        )

    def turn_in_progress(self) -> bool:
        """Whether the newest turn is unfinished (its last message is not the model's final reply)."""
        return turn_in_progress(self._messages)

    def _offload(
        self, leaving: list[Message], write_index: bool
    ) -> tuple[str | None, str | None, IndexWrite | None, str | None]:
        """Append `leaving` to the offload log (fsynced) and queue its index write: (path, warning, index
        job, section time). When the log cannot be written the messages are kept in the session file
        instead, and the warning says so; with `write_index` the index is written here and its warning
        returned."""
        offload_path, warning, job, when = None, None, None, None
        if self.offload_dir is None:
            self.kept_originals.append(
                {"time": time.time(), "reason": "no offload log configured", "messages": leaving}
            )
            return offload_path, warning, job, when
        target = self.offload_dir / f"{self.conversation_id}.md"
        # the originals of the leaving messages only: the archive keeps every one of the session's, and
        # decoding them all made each summary cost more the longer the session
        reclaimed = (
            {key: original for key in archive_ids(leaving) if (original := self._reclaimed.original(key)) is not None}
            if self._reclaimed
            else {}
        )
        when = utc_now_iso()
        try:
            offload_path = str(
                append_offload(target, leaving, conversation_id=self.conversation_id, reclaimed=reclaimed, when=when)
            )
        except OSError as exc:
            warning = (
                f"could not write the offload log {target} ({exc}); the originals are kept in the session file instead"
            )
            self.kept_originals.append({"time": time.time(), "reason": warning, "messages": leaving})
        else:  # the same step indexes them, so the log and the index never disagree (a failure is a warning);
            # inline here, or in a worker thread before `aapply_compaction` returns
            if self.recall_index is not None:
                index, session = self.recall_index, self.conversation_id
                job = self._queue_index_write(
                    lambda: index.index_offload(session, leaving, reclaimed=reclaimed, when=when), None
                )
                if write_index:
                    self.write_recall_index()
                    warning = job.warning
        return offload_path, warning, job, when

    def apply_compaction(
        self, plan: CompactionPlan, summary: str | None, *, write_index: bool = True
    ) -> SummaryCompactResult:
        """Apply a plan with the summary written for `plan.condensed`.

        No summary or an empty one: SUMMARIZE_FAILED and nothing changes (judging a summary's
        quality, e.g. that it is shorter than what it replaces, is the policy's job). On success the originals are
        appended to the offload log (fsynced) before they leave the conversation; if the log cannot be written they are
        kept in the session and the result carries a warning. Messages appended after planning stay, after the kept
        tail. With `write_index=False` the index write of the offload is only queued, and its warning is not
        in the result: `aapply_compaction` runs it in a thread and adds it.
        """
        Status = SummaryCompactResult.Status
        if plan.nothing_to_condense:
            return SummaryCompactResult(
                Status.NOTHING_TO_CONDENSE, "Nothing to condense: the history is already short."
            )
        if plan.edits != self._messages.edits or len(self._messages) < plan.message_count:
            raise StalePlanError("the conversation changed after the compaction was planned; plan again")
        if summary is None or not summary.strip():
            return SummaryCompactResult(Status.SUMMARIZE_FAILED, "The summarizer returned no summary; nothing changed.")
        summary = summary.strip()
        leaving = [m for m in plan.condensed if m.role != "system"]
        offload_path, warning, job, when = self._offload(leaving, write_index)
        new_tail = plan.kept + list(self._messages[plan.message_count :])
        ledger = plan.ledger
        self.set_system_message_content(summary, is_compressed=True)
        system = self._messages[0]
        if ledger is not None and isinstance(system, SystemPrompt):
            system = self._messages[0] = dataclasses.replace(system, ledger=ledger)
        self.messages = [system, *new_tail]
        self.total_tokens = None
        self.counted = None
        self.compaction_counter = CompactionCounter(
            tool_rounds=0, summary_rounds=self.compaction_counter.summary_rounds + 1
        )
        self._pinned.intersection_update(pinnable(new_tail))
        after = self.estimated_message_length()
        before = plan.estimated_length_before
        event = SummarizationEvent(
            plan.cut_index,
            summary,
            offload_path,
            time.time(),
            len(leaving),
            len(plan.kept),
            warning,
            when if offload_path else None,
            plan.carried_user is not None,
        )
        self.summarizations.append(event)
        if job is not None and not write_index:  # the index's warning, when it is written, is the summary's
            job.settle = lambda index_warning: setattr(event, "warning", index_warning)
        inside = (
            f"; inside the turn: {_count(plan.turn_rounds, 'call')} condensed, ledger "
            f"{_count(len(ledger.entries), 'entry', 'entries')}"
            if (plan.turn_rounds and ledger is not None)
            else ""
        )
        return SummaryCompactResult(
            Status.COMPACTED,
            f"Summarised {len(leaving)} messages, kept {len(new_tail)}{inside}.",
            turn_rounds=plan.turn_rounds,
            ledger_entries=len(ledger.entries) if ledger is not None else 0,
            ledger_calls=ledger.calls if ledger is not None else 0,
            reclaimed_fraction=1 - after / before if before else 0.0,
            condensed_count=len(leaving),
            kept_count=len(new_tail),
            length_before=before,
            length_after=after,
            offload_path=offload_path,
            warning=warning,
        )

    async def aapply_compaction(self, plan: CompactionPlan, summary: str | None) -> SummaryCompactResult:
        """`apply_compaction` for the event loop: the log is written and the conversation changed at once,
        then the offload is indexed in a worker thread; the result carries the index's warning."""
        before = len(self.summarizations)
        result = self.apply_compaction(plan, summary, write_index=False)
        event = self.summarizations[-1] if len(self.summarizations) > before else None
        await self.awrite_recall_index()
        if event is not None and event.warning != result.warning:
            result = dataclasses.replace(result, warning=event.warning)
        return result

    def compact(self, summarize: Callable[[list[Message]], str | None], keep_recent: int) -> SummaryCompactResult:
        """Tier 2: summarise all but a recent tail; `summarize(messages)` returning None gives up."""
        plan = self.plan_compaction(keep_recent)
        if plan.nothing_to_condense:
            return self.apply_compaction(plan, None)
        return self.apply_compaction(plan, summarize(plan.condensed))

    async def acompact(
        self, summarize: Callable[[list[Message]], Awaitable[str | None]], keep_recent: int
    ) -> SummaryCompactResult:
        """`compact` with an async summarizer (the agent's helper model)."""
        plan = self.plan_compaction(keep_recent)
        if plan.nothing_to_condense:
            return self.apply_compaction(plan, None)
        return await self.aapply_compaction(plan, await summarize(plan.condensed))

    # ------------------------------------------------------------ persistence

    def _head(self) -> dict[str, Any]:
        """The session but its archive of reclaimed originals (`dumps` puts that last). The messages come
        last but the archive, their count just before them, so a resume reads its newest turns without
        reading the rest (`read_newest_messages`)."""
        return {
            "conversation_id": self.conversation_id,
            "created_at": self.created_at,
            "updated_at": time.time(),
            "title": self.session_title(),
            "draft": self.draft,
            "tokens_used": self.total_tokens,
            "tokens_now": self.estimated_tokens(),
            "usage_totals": dict(self.usage_totals),
            "usage": {
                "chars": self.usage_chars,
                "messages": self.usage_messages,
                "tokens_per_char": self.tokens_per_char,
                "overhead_chars": self.overhead_chars,
                "fixed_tokens": self.fixed_tokens,
            },
            "pinned_toolcalls": sorted(self._pinned),
            "compaction": self.compaction_counter.to_json(),
            "prompt_cache": self.prompt_cache.to_json(),
            "summarizations": [e.to_json() for e in self.summarizations],
            "compaction_log": self.compaction_log,
            "kept_originals": [{**e, "messages": [m.to_json() for m in e["messages"]]} for e in self.kept_originals],
            "message_count": len(self._messages),
            "messages": [m.to_json() for m in self._messages],
        }

    def session_title(self) -> str | None:
        if self.title is None:  # the first prompt, remembered before a summary takes it out of the context
            first = next((m for m in self._messages if isinstance(m, UserMessage) and m.text.strip()), None)
            if first is not None:
                self.title = " ".join(first.text.split())[:80]
        return self.title

    def dumps(self) -> str:
        """The session as one compact JSON document (format 2):
        `{"format_version":2,"compacted_count":N,"compacted_chars":C,"compacted_bytes":B, ...the session...,
        "compacted_toolcalls":{...}}`.

        The archive of reclaimed originals comes last, its entry count and exact length in characters (and
        in bytes) first, so a reader takes the session without parsing the archive (`read_session`), and any
        JSON reader reads the whole. Format 1 was a JSON head line, then one JSON line per reclaimed original;
        format 0 (no `format_version`), one document whose `compacted_toolcalls` maps ids to originals.
        """
        return "".join(self._dumps(ensure_ascii=False))

    def _dumps(self, ensure_ascii: bool) -> Iterator[str]:
        return session_chunks(self._head(), self._reclaimed, ensure_ascii)

    def dump(
        self,
        path: str | os.PathLike[str],
        write: Callable[[str | os.PathLike[str], Iterable[str]], None] = write_text_atomic,
    ) -> None:
        """Save atomically (temporary file, fsync, rename: `write`), readable by the owner only. Text that
        UTF-8 cannot hold (a lone surrogate that got in some other way) is written as JSON escapes, so a
        save never fails on text."""
        try:
            write(path, self._dumps(ensure_ascii=False))  # in pieces: the archive's read as it is written
        except UnicodeEncodeError:
            write(path, self._dumps(ensure_ascii=True))
        self._reclaimed.saved(path)  # its originals are read from the new file from now on

    def loads(
        self, text: str | bytes, source: str | os.PathLike[str] | None = None, file: SessionFile | None = None
    ) -> Conversation:
        """Load session text (this format or an older one); on any problem raise SessionFormatError, change nothing.
        `file`: the session file `text` was read from, held open (the archive reads its originals there)."""
        state = parse_session_text(text, source, file)
        for name, value in state.items():
            setattr(self, name, value)
        return self

    def answer_unanswered_calls(self) -> int:
        """Give each tool call that has no result one (`UNANSWERED_AT_LOAD`), as a session opened to work
        on needs; returns how many. (A load itself keeps the file as it is: `loads` never changes it.)"""
        inserted = answer_unanswered_calls(self._messages)
        self.usage_messages += sum(1 for index in inserted if index < self.usage_messages)
        return len(inserted)

    def load(self, path: str | os.PathLike[str], *, peek: Callable[[Path], object] | None = None) -> Conversation:
        """Load the session file at `path`; `peek` is called with it first (a resume shows the newest turns,
        `read_newest_messages`, before the whole is read)."""
        if peek is not None:
            peek(Path(path))
        state = parse_session_file(path)
        for name, value in state.items():
            setattr(self, name, value)
        return self
