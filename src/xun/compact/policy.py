"""The automatic policies: the seed's escalation (`AutoCompactor`) and the cache-aware one
(`CacheAwareCompactor`, the default), awaited before every model call.

Each reports every step as events (`xun.base.events`), which the agent also records in the session's log;
the summaries they ask for are written by `xun.compact.summary`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from xun.base.events import CompactionFailed, CompactionSkipped, Warning

from xun.compact.breakdown import current_turn_results, first_tool_result, reclaim_preview, tokens_from
from xun.compact.summary import compact_conversation, worthwhile_keep

if TYPE_CHECKING:
    from xun.compact.host import CompactionHost
    from xun.context.compaction_results import ToolCallCompactResult
    from xun.context.conversation import Conversation


ESCALATION_RATIO = 0.95
"""An estimate must fall to this fraction of the threshold to count as progress (module constant)."""


MAX_CONSECUTIVE_FAILURES = 3
"""After this many automatic compactions failed in a row, the model's summaries pause. Only they do:
reclaims go on, and a summary that is due meanwhile is xun's own (extractive, no request), so a turn
never runs into the window for want of a summarizer."""
PAUSE_CALLS = 10
"""The first pause, in model calls; each failure after it doubles the next one, up to PAUSE_CALLS_MAX (a
broken summarizer costs a request now and then, never one per call), and a model's summary ends it."""
PAUSE_CALLS_MAX = 160


class CompactorAbstract(ABC):
    """A compaction policy: awaited by the agent before every model call."""

    @abstractmethod
    async def auto_compact(self, agent: CompactionHost) -> None: ...

    @property
    def paused(self) -> bool:
        """Whether the model's summaries are paused (the window guard then writes xun's own)."""
        return False

    async def summary_failed(self, agent: CompactionHost) -> None:
        """A summary the window guard asked the model for failed (xun's own stood in)."""


SUMMARIES_OFF = "automatic summaries are off (auto_compact.mode = off)"
"""The reason of the automatic policy's skip when `auto_compact.mode` is "off" (the app says it once in the chat)."""


class AutoCompactor(CompactorAbstract):
    """The seed's tiered policy: reclaim old tool results; escalate to a summary when reclaiming is not
    enough or has run `escalation_rounds` times; retry with halved keep counts while still too large."""

    def __init__(
        self, toolcall_keep_max: int = 12, summary_keep_max: int = 16, escalation_rounds: int = 2, max_retries: int = 2
    ):
        self.toolcall_keep_max = toolcall_keep_max
        self.summary_keep_max = summary_keep_max
        self.escalation_rounds = escalation_rounds
        self.max_retries = max_retries
        self.consecutive_failures = 0
        self._told_dead_end: int | None = None
        """The turn (its prompt's identity) of the last "nothing more can be done" notice: one per turn."""
        self.paused_calls = 0
        """The model calls left before the model is asked for a summary again (after MAX_CONSECUTIVE_FAILURES)."""
        self._pause_length = 0
        self._log_at_pause = 0
        """The compaction log's length when the pause began: a model's summary after it ends the pause."""

    @classmethod
    def from_config(cls, settings: Any) -> AutoCompactor:
        return cls(
            settings.toolcall_keep_max, settings.summary_keep_max, settings.escalation_rounds, settings.max_retries
        )

    def needs_compaction(self, agent: CompactionHost) -> bool:
        """The trigger: the estimate of the request about to be sent (the last reported count plus what
        was added since: the new prompt, tool results) above the threshold. Incremental, so it is cheap
        before every call."""
        settings = agent.config.auto_compact
        return settings.enabled and agent.request_tokens() > agent.threshold

    @property
    def paused(self) -> bool:
        return self.paused_calls > 0

    def resume(self) -> None:
        """A model's summary (the policy's, or one by hand) or the user's choice ends a pause and its doubling."""
        self.consecutive_failures = self.paused_calls = self._pause_length = 0

    async def auto_compact(self, agent: CompactionHost) -> None:
        if self.paused_calls:  # this model call is one of the pause's, unless a model's summary ended it
            log = agent.conversation.compaction_log[self._log_at_pause :]
            if any(r.get("type") == "summary_finished" and r.get("method") == "model" for r in log):
                self.resume()
            else:
                try:
                    await self.compact_if_needed(agent)  # reclaims, and xun's own summaries
                finally:
                    self.paused_calls = max(self.paused_calls - 1, 0)
                return
        await self.compact_if_needed(agent)

    async def compact_if_needed(self, agent: CompactionHost) -> None:
        if not self.needs_compaction(agent):
            return
        conversation = agent.conversation
        threshold = agent.threshold
        target = threshold * ESCALATION_RATIO
        tokens = agent.request_tokens()
        keep_tools, keep_messages = self.toolcall_keep_max, self.summary_keep_max
        for attempt in range(self.max_retries + 1):
            keep = self.first_keep(agent, keep_tools) if attempt == 0 else keep_tools
            reclaimed = await agent.reclaim_tool_results(keep, trigger="auto", tokens_before=tokens)
            estimate = agent.request_tokens()
            if self.reclaim_was_enough(agent, attempt, estimate, target):
                return  # (a reclaim says nothing of the summarizer: failures in a row and a pause go on)
            why = self.why_summary(agent, attempt, keep, reclaimed, estimate, target)
            if not await agent.consent_to_summary():
                off = agent.config.auto_compact.mode == "off"
                reason = SUMMARIES_OFF if off else "automatic summary declined"
                await agent.emit(CompactionSkipped(reason=reason, trigger="auto"))
                return
            worthwhile = worthwhile_keep(conversation, keep_messages)
            if worthwhile is None and attempt and estimate <= threshold:
                return  # an earlier round brought it under the threshold: nothing to report
            if worthwhile is None:
                why_not = (
                    "a summary now would not make the context smaller (what lies before the newest messages "
                    "is too small to condense)"
                )
                if estimate <= threshold:  # under it after the reclaim: the summary was due by the escalation
                    reason = (
                        f"no summary: a reclaim brought the context from about {tokens:,} tokens "
                        f"(over the threshold of {threshold:,}) to about {estimate:,}, under it; a summary was "
                        f"also due ({why}), but {why_not}"
                    )
                else:
                    reason = (
                        f"nothing more to compact: about {estimate:,} tokens, and {why_not}; the next prompt "
                        "or tool result may change that"
                    )
                await self._dead_end(agent, CompactionSkipped(reason=reason, trigger="auto"))
                return
            keep_messages = worthwhile
            result = await compact_conversation(
                agent,
                keep_recent=keep_messages,
                instructions=agent.config.compression.instructions,
                trigger="auto",
                why=why,
                ask_model=not self.paused,
            )
            if not result.compacted:
                if not result.did_not_fit:  # a request that did not fit is xun's bug, not the model's failure
                    await self._failed(agent)
                return
            if not result.without_model:  # the model wrote it: its failures in a row end
                self.resume()
            tokens = agent.request_tokens()
            if tokens <= target:
                return
            keep_tools, keep_messages = max(reclaim_floor(conversation), keep_tools // 2), max(1, keep_messages // 2)
        await self._dead_end(
            agent,
            CompactionFailed(
                reason=f"still about {tokens} tokens after {self.max_retries + 1} compactions (threshold {threshold}); "
                "no further progress is possible",
                trigger="auto",
            ),
        )
        await self._failed(agent)

    async def _dead_end(self, agent: CompactionHost, event: CompactionSkipped | CompactionFailed) -> None:
        """Say once per turn that compaction can do no more: a long turn calls the policy before every
        model call, and the same notice on every call says nothing new."""
        conversation = agent.conversation
        anchor = conversation.turn_prompt_index()
        key = id(conversation.messages[anchor]) if anchor >= 0 else -1
        if key == self._told_dead_end:
            return
        self._told_dead_end = key
        await agent.emit(event)

    def first_keep(self, agent: CompactionHost, keep_tools: int) -> int:
        """How many recent tool results the first reclaim keeps (the seed: `toolcall_keep_max`)."""
        return keep_tools

    def why_summary(
        self,
        agent: CompactionHost,
        attempt: int,
        keep: int,
        reclaimed: ToolCallCompactResult,
        estimate: int,
        target: float,
    ) -> str:
        """Why the policy goes on to a summary after this reclaim, with the figures it judged (the
        compaction log shows it, so that tier 2 never comes without saying why tier 1 was not enough)."""
        over = f"about {estimate:,} tokens, above {round(target):,} (95% of the threshold {agent.threshold:,})"
        if attempt:
            return f"still {over} after a summary: once more with fewer kept ({keep} tool results)"
        if estimate > target and not reclaimed.reclaimed_count:
            return (
                f"a reclaim first replaced nothing ({reclaim_preview(agent.conversation, keep).why_nothing}): still "
                f"{over}"
            )
        if estimate > target:
            n = reclaimed.reclaimed_count
            return f"a reclaim first replaced {n} tool result{'s' if n != 1 else ''}, keeping {keep}: still {over}"
        rounds = agent.conversation.compaction_counter.tool_rounds
        return (
            f"{rounds} reclaim rounds since the last summary, and auto_compact.escalation_rounds allows "
            f"{self.escalation_rounds} before one: the next step is a summary"
        )

    def reclaim_was_enough(self, agent: CompactionHost, attempt: int, estimate: int, target: float) -> bool:
        """Whether to stop after a reclaim: under the target, and (on the first attempt) fewer than
        `escalation_rounds` cheap rounds since the last summary."""
        if estimate > target:
            return False
        return attempt > 0 or agent.conversation.compaction_counter.tool_rounds < self.escalation_rounds

    async def summary_failed(self, agent: CompactionHost) -> None:
        """The window guard's failures count as the policy's: a summarizer that fails there is paused too."""
        await self._failed(agent)

    async def _failed(self, agent: CompactionHost) -> None:
        """One more automatic failure: from MAX_CONSECUTIVE_FAILURES in a row, a pause of the model's
        summaries, longer each time. While they are paused no model is asked, so nothing counts."""
        if self.paused:
            return
        self.consecutive_failures += 1
        if self.consecutive_failures < MAX_CONSECUTIVE_FAILURES:
            return
        self._pause_length = min(PAUSE_CALLS_MAX, self._pause_length * 2 or PAUSE_CALLS)
        self.paused_calls = self._pause_length
        self._log_at_pause = len(agent.conversation.compaction_log)
        await agent.emit(
            Warning(
                f"automatic compaction failed {self.consecutive_failures} times in a row: it pauses the model's "
                f"summaries for the next {self.paused_calls} model calls, then tries again (each failure doubles the "
                f"pause, up to {PAUSE_CALLS_MAX}); meanwhile reclaims go on, and a summary that is due is xun's own "
                "(extractive); a summary by hand (/compact, F5) asks the model, and ends the pause when it works"
            )
        )


PAYBACK_CALLS = 20
"""A reclaim below the threshold runs only when what it saves on the cached price of the calls after it
pays, within this many calls, for the prefix it breaks (which the next call pays uncached)."""


class CacheAwareCompactor(AutoCompactor):
    """The seed's policy, priced by the server's prompt cache: a cached input token costs
    `cache.cached_discount` (about a tenth) of an uncached one, and a change to a message makes the next
    call pay full price for it and everything after it. Measured on `tests/benchmarks/bench_cache.py`:

    - before a call between the low-water mark (`low_water` of the threshold) and the threshold, old tool
      results are reclaimed when that pays for itself within PAYBACK_CALLS calls: the saving per call (the
      discounted price of the reclaimed tokens) against the one-time price of the broken prefix. Reclaims
      then come early and cut late in the conversation (cheap), instead of seldom and deep (every old
      result stays in every call until then). The current turn's results are never reclaimed this way,
      and at most the newest `toolcall_keep_max` are kept; below the mark nothing is reclaimed early;
    - over the threshold, a reclaim goes down to `low_water` of the threshold (keeping fewer recent tool
      results, at least one), and one that reaches the mark is enough: no escalation to a summary for it;
      reclaims that fall short escalate as in the seed;
    - after an idle gap longer than the cache's time to live, the whole prompt is paid in full anyway, so
      compaction there costs nothing in cache: old tool results are reclaimed to the low-water mark, and
      when the context is still above it, the older turns are summarised too (a summary that the
      threshold would force later, at the price of a broken prefix; only in `auto_compact.mode` "auto").
    """

    def __init__(
        self,
        *args: Any,
        low_water: float = 0.5,
        ttl_seconds: float = 300.0,
        cached_discount: float = 0.1,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.low_water = low_water
        self.ttl_seconds = ttl_seconds
        self.cached_discount = cached_discount

    @classmethod
    def from_config(cls, settings: Any, cache: Any = None) -> CacheAwareCompactor:
        ttl = cache.ttl_seconds if cache is not None else 300.0
        discount = cache.cached_discount if cache is not None else 0.1
        return cls(
            settings.toolcall_keep_max,
            settings.summary_keep_max,
            settings.escalation_rounds,
            settings.max_retries,
            low_water=settings.low_water,
            ttl_seconds=ttl,
            cached_discount=discount,
        )

    def cache_is_cold(self, agent: CompactionHost) -> bool:
        """Whether the last call was longer ago than the cache's time to live (by `agent.clock`)."""
        last = agent.conversation.prompt_cache.last_call_at
        return last is not None and agent.clock() - last > self.ttl_seconds

    def first_keep(self, agent: CompactionHost, keep_tools: int) -> int:
        """The most recent tool results a reclaim can keep and still bring the estimate to the low-water
        mark (`reclaim_floor` when even that does not)."""
        target = agent.threshold * self.low_water
        tokens = agent.request_tokens()
        floor = reclaim_floor(agent.conversation)
        for keep in range(keep_tools, floor, -1):
            if tokens - reclaim_preview(agent.conversation, keep).tokens_saved <= target:
                return keep
        return floor

    def reclaim_was_enough(self, agent: CompactionHost, attempt: int, estimate: int, target: float) -> bool:
        """As the seed's, except that a reclaim reaching the low-water mark is always enough: the cheap
        rounds escalate to a summary (which rewrites the whole prefix) only while they fall short of it."""
        if estimate <= agent.threshold * self.low_water:
            return True
        return super().reclaim_was_enough(agent, attempt, estimate, target)

    def paying_keep(self, agent: CompactionHost) -> int | None:
        """The number of newest tool results to keep for the reclaim that pays best within PAYBACK_CALLS
        calls (None when none pays): never fewer than the current turn's results (the model has not
        answered them yet), never more than `toolcall_keep_max`."""
        conversation = agent.conversation
        d = self.cached_discount
        best, best_keep = 0.0, None
        for keep in range(self.toolcall_keep_max, max(current_turn_results(conversation), 1) - 1, -1):
            preview = reclaim_preview(conversation, keep)
            first = first_tool_result(conversation, preview.ids) if preview.count else None
            if first is None:
                continue
            broken = tokens_from(conversation, first) - preview.tokens_saved
            gain = d * preview.tokens_saved * PAYBACK_CALLS - (1 - d) * broken
            if gain > best:
                best, best_keep = gain, keep
        return best_keep

    async def _reclaim_quietly(self, agent: CompactionHost, keep: int, trigger: str) -> None:
        """A reclaim that is not a round of the escalation (nothing was over the threshold)."""
        counter = agent.conversation.compaction_counter
        rounds = counter.tool_rounds
        await agent.reclaim_tool_results(keep, trigger=trigger)
        counter.tool_rounds = rounds

    async def compact_while_cold(self, agent: CompactionHost) -> None:
        """The idle rule: reclaim to the low-water mark; then, still above it, summarise the older turns."""
        keep = max(self.first_keep(agent, self.toolcall_keep_max), current_turn_results(agent.conversation), 1)
        if reclaim_preview(agent.conversation, keep).count:
            await self._reclaim_quietly(agent, keep, "idle")
        if (
            agent.request_tokens() <= agent.threshold * self.low_water
            or agent.config.auto_compact.mode != "auto"
            or self.paused
        ):
            return  # an optimisation, not a need: nobody is asked for it (mode "ask"), "off" means off, and
            # while the model's summaries are paused xun's own waits until one is needed
        keep_messages = worthwhile_keep(agent.conversation, self.summary_keep_max)
        if keep_messages is not None:
            result = await compact_conversation(
                agent, keep_recent=keep_messages, instructions=agent.config.compression.instructions, trigger="idle"
            )
            if not result.compacted and not result.did_not_fit:
                await self._failed(agent)

    async def compact_if_needed(self, agent: CompactionHost) -> None:
        if agent.config.auto_compact.enabled:
            if self.cache_is_cold(agent):
                await self.compact_while_cold(agent)
            elif (
                agent.threshold * self.low_water < agent.request_tokens() <= agent.threshold
                and (keep := self.paying_keep(agent)) is not None
            ):
                await self._reclaim_quietly(agent, keep, "early")
        await super().compact_if_needed(agent)


def reclaim_floor(conversation: Conversation) -> int:
    """The fewest recent tool results an automatic reclaim keeps: one while the turn in progress has a
    result of its own (the model is working with it), none when the newest belong to finished turns (the
    model's reply took them in, and a placeholder costs far less than summarising their turn away)."""
    return min(1, current_turn_results(conversation))


def compactor_from_config(config: Any) -> AutoCompactor:
    """The automatic policy the configuration names (`auto_compact.policy`)."""
    if config.auto_compact.policy == "cache-aware":
        return CacheAwareCompactor.from_config(config.auto_compact, config.cache)
    return AutoCompactor.from_config(config.auto_compact)
