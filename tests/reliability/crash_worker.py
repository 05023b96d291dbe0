"""The crash worker: runs a scripted xun session and SIGKILLs itself at a chosen point.

    python3 crash_worker.py count WORKDIR            run the session once, print how often each point is hit
    python3 crash_worker.py kill PLAN.json           for each kill point of the plan, fork a child that runs
                                                     the session in the point's workdir and kills itself there

Run by `tests/reliability/crashes.py` (the harness of `test_crashes.py` and `bench_crashes.py`), never by
pytest directly. The product code is not touched: the points are wrappers installed here, in the child
only, around functions of the engine and of `os`. A point is (target, n, mode): the n-th call of the
target outside the offline server's threads, killed `before` the call, `after` it, or `torn` (half of the data written,
then killed: for `os.write` and for the text written by `xun.base.atomic.write_text_atomic`).

The session is the one a user has: a `SessionStore` conversation in WORKDIR/.xun, an agent on an offline
server started in the child, a small compaction threshold (reclaims and summaries with their offload-log
appends and history-index writes), a confirmed `write_file`, and a save after every turn. A journal
(WORKDIR/journal.jsonl, written with the unwrapped `os` functions) records what must survive: before a
save, the SHA-256 of the text about to be written; after it, the texts of every message added since the
previous save. The harness compares the files left on disk after the kill with that journal.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import openai  # noqa: E402  (imported here, once: the agent imports it lazily, which every child would repeat)

import xun.base.atomic  # noqa: E402
import xun.context.conversation  # noqa: E402
import xun.context.sessions  # noqa: E402
from xun.agent.loop import Agent  # noqa: E402
from xun.agent.config import XunConfig  # noqa: E402
from xun.context.conversation import Conversation  # noqa: E402
from xun.offline import OfflineServer  # noqa: E402
from xun.context.recall import RecallIndex  # noqa: E402
from xun.context.sessions import SessionStore  # noqa: E402

CONVERSATION_ID = "crash"
NOTES_CONTENT = " | ".join(f"note {i}: the crash test wrote this line" for i in range(40))
PROMPTS = (
    "please read f1.py",
    "read f2.py and f3.py",
    "please read f4.py",
    "search for `file 5` in .",
    "write `NOTES` to notes.txt",
    "please read f5.py",
    "read f6.py and f7.py",
    "list the files",
    "please read f8.py",
    "please read f9.py",
    "read f10.py and f11.py",
    "please read f12.py",
)

_real_open, _real_write, _real_close = os.open, os.write, os.close


class Journal:
    def __init__(self, path: Path) -> None:
        self.fd = _real_open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.pending: list[str] = []
        self.saves = 0

    def write(self, record: dict) -> None:
        _real_write(self.fd, (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass"))

    def add(self, *texts: object) -> None:
        self.pending.extend(t for t in texts if isinstance(t, str) and t)


def prepare(workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    for i in range(1, 13):
        (workdir / f"f{i}.py").write_text("".join(f"line {j} of file {i}\n" for j in range(60)))


def journal_messages(journal: Journal) -> None:
    """Record the text of every message the agent adds (they must survive once a save has completed)."""
    add_user, add_agent, add_tool = (
        Conversation.add_user_message,
        Conversation.add_agent_message,
        Conversation.add_tool_result,
    )

    def add_user_message(self, content, images=None):
        add_user(self, content, images)
        if self.conversation_id == CONVERSATION_ID:  # not the summarizer's own conversation
            journal.add(content)

    def add_agent_message(self, message):
        add_agent(self, message)
        if self.conversation_id == CONVERSATION_ID:
            raw = self.messages[-1].raw
            journal.add(
                raw.get("content"), *((c.get("function") or {}).get("arguments") for c in raw.get("tool_calls") or ())
            )

    def add_tool_result(self, tool_call_id, content):
        add_tool(self, tool_call_id, content)
        if self.conversation_id == CONVERSATION_ID:
            journal.add(self.messages[-1].raw.get("content"))

    Conversation.add_user_message, Conversation.add_agent_message, Conversation.add_tool_result = (
        add_user_message,
        add_agent_message,
        add_tool_result,
    )
    real_write = xun.context.sessions.write_state  # SessionStore.save writes a session through it

    def write_session(path, text, *args, **kwargs):
        text = text if isinstance(text, str) else "".join(text)  # (a session is saved in pieces)
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        journal.saves += 1
        journal.write({"saving": journal.saves, "sha": digest})
        real_write(path, text, *args, **kwargs)
        journal.write({"saved": journal.saves, "sha": digest, "texts": journal.pending})
        journal.pending = []

    xun.context.sessions.write_state = write_session


# ------------------------------------------------------------------------------------------- kill points


class Points:
    """Counts the calls of every target; kills the process at the planned one."""

    def __init__(self, kill: dict | None) -> None:
        self.counts: dict[str, int] = {}
        self.kill = kill

    def hit(self, target: str) -> str | None:
        """Count a call; the mode to kill it with when it is the planned one."""
        if threading.current_thread().daemon:  # the offline server's threads (tools run in non-daemon ones)
            return None
        n = self.counts[target] = self.counts.get(target, 0) + 1
        kill = self.kill
        if kill is not None and kill["target"] == target and kill["n"] == n:
            return kill["mode"]
        return None

    @staticmethod
    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def wrap(self, owner, name: str, target: str) -> None:
        real = getattr(owner, name)
        points = self

        if asyncio.iscoroutinefunction(real):

            async def wrapper(*args, **kwargs):
                mode = points.hit(target)
                if mode == "before":
                    points.die()
                result = await real(*args, **kwargs)
                if mode == "after":
                    points.die()
                return result
        else:

            def wrapper(*args, **kwargs):
                mode = points.hit(target)
                if mode == "before":
                    points.die()
                result = real(*args, **kwargs)
                if mode == "after":
                    points.die()
                return result

        setattr(owner, name, wrapper)

    def wrap_os_write(self) -> None:
        real = os.write

        def write(fd, data):
            mode = self.hit("os.write")
            if mode == "before":
                self.die()
            if mode == "torn":
                real(fd, bytes(data)[: max(1, len(data) // 2)])
                self.die()
            written = real(fd, data)
            if mode == "after":
                self.die()
            return written

        os.write = write

    def wrap_atomic_text(self) -> None:
        """The text `write_text_atomic` writes into its temporary file (through `os.fdopen`)."""
        real_fdopen = os.fdopen
        points = self

        class Handle:
            def __init__(self, handle):
                self.handle = handle

            def write(self, text):
                mode = points.hit("atomic.write")
                if mode == "before":
                    points.die()
                if mode == "torn":
                    self.handle.write(text[: max(1, len(text) // 2)])
                    self.handle.flush()
                    points.die()
                written = self.handle.write(text)
                if mode == "after":
                    self.handle.flush()
                    points.die()
                return written

            def __getattr__(self, name):
                return getattr(self.handle, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return self.handle.__exit__(*exc)

        def fdopen(fd, *args, **kwargs):
            handle = real_fdopen(fd, *args, **kwargs)
            mode = args[0] if args else kwargs.get("mode", "r")
            if "w" in mode and sys._getframe(1).f_globals.get("__name__") == "xun.base.atomic":
                return Handle(handle)
            return handle

        os.fdopen = fdopen

    def install(self) -> None:
        self.wrap(Agent, "emit", "event")
        self.wrap(Agent, "_stream_once", "model_call")
        self.wrap(SessionStore, "save", "save")
        self.wrap(Conversation, "reclaim_tool_results", "reclaim_tool_results")
        self.wrap(Conversation, "apply_compaction", "apply_compaction")
        self.wrap(xun.context.conversation, "append_offload", "append_offload")
        self.wrap(RecallIndex, "index_offload", "index_offload")
        self.wrap(RecallIndex, "index_reclaimed", "index_reclaimed")
        self.wrap(os, "fsync", "os.fsync")
        self.wrap(os, "replace", "os.replace")
        self.wrap_os_write()
        self.wrap_atomic_text()


# ------------------------------------------------------------------------------------------ the session


async def session(workdir: Path) -> None:
    server = OfflineServer().start()
    try:
        config = XunConfig()
        config.provider.base_url = server.base_url
        config.model.name = "xun-offline"
        config.auto_confirm = True
        config.auto_compact.token_threshold = 3000
        config.auto_compact.toolcall_keep_max = 2
        config.auto_compact.summary_keep_max = 6
        config.auto_compact.policy = "escalation"  # a summary every few turns: many offload and apply points to kill at
        store = SessionStore(workdir)
        conversation = store.new()
        conversation.conversation_id = CONVERSATION_ID
        agent = Agent(config, conversation=conversation, workdir=workdir, environ={})
        agent.system("You are the crash-test agent.")
        for prompt in PROMPTS:
            await agent.run(prompt.replace("NOTES", NOTES_CONTENT))
            store.save(agent.conversation)
    finally:
        server.stop()


def run(workdir: Path, kill: dict | None) -> dict[str, int]:
    prepare(workdir)
    journal_messages(Journal(workdir / "journal.jsonl"))
    points = Points(kill)
    points.install()
    asyncio.run(session(workdir))
    return points.counts


def main(argv: list[str]) -> int:
    command, arg = argv[0], Path(argv[1])
    openai.AsyncOpenAI(api_key="warm-up", base_url="http://127.0.0.1:9/v1")  # the SDK's own lazy imports too
    if command == "count":
        print(json.dumps(run(arg, None)), flush=True)
        return 0
    plan = json.loads(arg.read_text())
    for point in plan:
        pid = os.fork()
        if pid == 0:  # the child: run the session until the point kills it
            code = 0
            try:
                run(Path(point["workdir"]), point)
            except BaseException:  # noqa: BLE001 - reported as a non-kill exit
                import traceback

                traceback.print_exc()
                code = 3
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        print(json.dumps({"id": point["id"], "killed": killed, "exit": exit_code}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
