"""`neutralise_summary_tags` on 1 MB texts, honest and hostile: the best of 3 runs (its cache bypassed).
Not collected by pytest.

    PYTHONPATH=src python3 tests/benchmarks/bench_neutralise.py
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from xun.context import messages

SIZE = 1_000_000


def _texts() -> dict[str, str]:
    random.seed(1)
    source = Path(messages.__file__).with_name("conversation.py").read_text(encoding="utf-8")
    prose = "Բարև ձեզ <ոչ> 안녕하세요 ㅤ ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ "
    return {
        "Python source": source * (SIZE // len(source) + 1),
        "HTML": '<div class="a"><span>x &lt; y</span></div>\n' * (SIZE // 44 + 1),
        "Chinese": "".join(chr(random.randint(0x4E00, 0x9FFF)) for _ in range(SIZE)),
        "Armenian, Korean, Cherokee": prose * (SIZE // len(prose) + 1),
        "only <": "<" * SIZE,
        "< then punctuation": ("<" + "/" * 63 + "\u200b" * 64) * (SIZE // 128),
        "near-miss tags": ("</c\u200bo\u0578versation_summar" + "\u3164" * 20 + " ") * (SIZE // 48),
        "a tag every 1000": ("x" * 977 + "</conversation_summary>") * (SIZE // 1000),
        "100 \u2039 before each tag": ("\u2039" * 100 + "conversation_summary ") * (SIZE // 121),
        "one invisible run": "<conversation" + "\u200b" * SIZE,
    }


def main() -> None:
    neutralise = messages.neutralise_summary_tags.__wrapped__
    for name, text in _texts().items():
        text = text[:SIZE]
        times = []
        for _ in range(3):
            started = time.perf_counter()
            neutralise(text)
            times.append(time.perf_counter() - started)
        print(f"{name:28} {len(text):>9,} characters {min(times) * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
